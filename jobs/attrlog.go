package jobs

import (
	"context"
	"log/slog"
	"slices"
)

// attrLogger is a logger whose attributes are formatted only when a record
// is emitted. slog.Logger.With formats them at once (the JSON handler
// renders them ahead), which for three loggers per delivery was a
// twentieth of ax's CPU at thousands of deliveries a second, spent on
// records the level then dropped.
type attrLogger struct {
	l     *slog.Logger
	attrs []slog.Attr
}

func newAttrLogger(l *slog.Logger, attrs ...slog.Attr) attrLogger {
	return attrLogger{l: l, attrs: attrs}
}

// with returns a logger with attrs added; a's own are left as they are.
func (a attrLogger) with(attrs ...slog.Attr) attrLogger {
	return attrLogger{l: a.l, attrs: append(slices.Clip(a.attrs), attrs...)}
}

func (a attrLogger) log(ctx context.Context, level slog.Level, msg string, attrs []slog.Attr) {
	if !a.l.Enabled(ctx, level) {
		return
	}
	a.l.LogAttrs(ctx, level, msg, append(slices.Clip(a.attrs), attrs...)...)
}

func (a attrLogger) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	a.log(ctx, slog.LevelDebug, msg, attrs)
}

func (a attrLogger) info(ctx context.Context, msg string, attrs ...slog.Attr) {
	a.log(ctx, slog.LevelInfo, msg, attrs)
}

func (a attrLogger) warn(ctx context.Context, msg string, attrs ...slog.Attr) {
	a.log(ctx, slog.LevelWarn, msg, attrs)
}
