package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/api"
)

const usage = `usage: ax [command] [flags]

commands:
  serve     run the API, scheduler and workers (the default)
  migrate   apply database migrations and exit
  token     print an API token: ax token --tenant T [--scope "s1 s2"] [--ttl 1h],
            or an operator's: ax token --operator [--subject S] [--ttl 1h]
  runner    run commands from ax's signed webhooks: ax runner --secret whsec_… --allow REGEXP
  import-crontab
            print apply documents for a crontab: ax import-crontab FILE --endpoint NAME
  version   print the version

Configuration comes from AX_* environment variables; see README.md.`

// run is the whole program; main only supplies the process's context,
// arguments, environment and stdout. Tests call it too.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd != "token" && cmd != "runner" && cmd != "import-crontab" && slices.ContainsFunc(args, isHelp) {
		cmd = "help"
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout)
	case "migrate":
		return migrate(ctx, args, getenv)
	case "token":
		return token(args, getenv, stdout, os.Stderr)
	case "runner":
		return runRunner(ctx, args, getenv, stdout)
	case "import-crontab":
		return importCrontab(args, getenv, os.Stdin, stdout, os.Stderr)
	case "version":
		_, err := fmt.Fprintln(stdout, "ax", version())
		return err
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(stdout, usage)
		return err
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

// isHelp reports whether arg asks for the usage.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// version is the module version or VCS revision baked in by the Go tool.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "dev-" + rev
}

// secretFile is where the embedded mode keeps its generated HS256 secret.
const secretFile = "jwt-secret"

// jwtSecret returns the HS256 secret: AX_JWT_SECRET when set; in embedded
// mode, the development secret kept in the data directory (generated on
// first use, mode 0600); otherwise nil.
func jwtSecret(cfg config) ([]byte, error) {
	if len(cfg.JWTSecret) > 0 || !cfg.Embedded() {
		return cfg.JWTSecret, nil
	}
	if err := makeDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.DataDir, secretFile)
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < jwtSecretMin {
			return nil, fmt.Errorf("%s holds a secret shorter than %d characters; delete it to generate a new one", path, jwtSecretMin)
		}
		return []byte(s), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read development secret: %w", err)
	}
	raw := make([]byte, 48)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	s := base64.RawURLEncoding.EncodeToString(raw)
	// O_EXCL: when two processes race, one writes and the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return jwtSecret(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("write development secret: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write development secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write development secret: %w", err)
	}
	return []byte(s), nil
}

// makeDataDir creates the data directory. When ax runs as root, the
// embedded Postgres runs as the postgres account, which must be able to
// traverse (not list) it.
func makeDataDir(dir string) error {
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o711
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create AX_DATA_DIR %s: %w", dir, err)
	}
	return nil
}

// token prints a token on stdout; notices is where it says what else it
// did (a secret it created), stdout carrying only the token.
func token(args []string, getenv func(string) string, stdout, notices io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	var errBuf strings.Builder
	fs.SetOutput(&errBuf)
	tenant := fs.String("tenant", "", "the tenant the token acts for (required unless --operator)")
	scope := fs.String("scope", strings.Join(api.TenantScopes(), " "), "space-separated tenant scopes (admin: all of them)")
	operator := fs.Bool("operator", false, "an operator token instead: tenant claim \"*\", scope \"operator\"; it reads and sets\n"+
		"any tenant's limits, lists the replicas and opens River UI, and reaches no tenant's\nresources (no --tenant, no --scope)")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	subject := fs.String("subject", "ax-token", "the token's subject (sub); audit records name it")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprintf(stdout, "usage: ax token --tenant T [flags]\n       ax token --operator [flags]\n\nflags:\n%s", errBuf.String())
		return err
	} else if err != nil {
		return fmt.Errorf("token: %s", strings.TrimSpace(errBuf.String()))
	}
	scopeSet := false
	fs.Visit(func(f *flag.Flag) { scopeSet = scopeSet || f.Name == "scope" })
	switch {
	case *operator && (*tenant != "" || scopeSet):
		return errors.New("token: --operator takes no --tenant and no --scope: an operator token acts for no tenant")
	case *operator:
	case *tenant == "":
		return errors.New("token: --tenant is required (or --operator for an operator token)")
	}
	if *ttl <= 0 {
		return errors.New("token: --ttl must be positive")
	}
	for _, s := range strings.Fields(*scope) {
		if s == api.ScopeOperator && !*operator {
			return errors.New("token: the operator scope is an operator token's: use --operator (without --tenant)")
		}
		if !*operator && !contains(api.AllScopes(), s) {
			return fmt.Errorf("token: unknown scope %q (known: %s)", s, strings.Join(api.AllScopes(), " "))
		}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	existed := !cfg.Embedded() || len(cfg.JWTSecret) > 0 || fileExists(filepath.Join(cfg.DataDir, secretFile))
	secret, err := jwtSecret(cfg)
	if err != nil {
		return err
	}
	if len(secret) == 0 {
		return errors.New("token: AX_JWT_SECRET is not set; ax token signs HS256 tokens with it")
	}
	if !existed {
		fmt.Fprintf(notices, "ax token: created a new development secret in %s; a server using another AX_DATA_DIR "+
			"refuses this token\n", filepath.Join(cfg.DataDir, secretFile))
	}
	var tok string
	if *operator {
		tok, err = api.IssueOperatorToken(secret, *subject, *ttl, cfg.JWTIssuer, cfg.JWTAudience)
	} else {
		tok, err = api.IssueToken(secret, *tenant, *subject, strings.Fields(*scope), *ttl, cfg.JWTIssuer, cfg.JWTAudience)
	}
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
