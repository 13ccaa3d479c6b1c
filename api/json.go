package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
)

// jsonSerializer writes a JSON response as one block with its
// Content-Length, where echo's default streams it through net/http's small
// buffer as a chunked body: a page of executions (about 25 kB) took
// several write calls, a tenth of the list request's CPU. The bytes are
// the same (encoding/json's, a trailing newline; hot responses write
// themselves: jsonappend.go). Requests decode as echo's
// default does (the handlers' own binding reads bodies; see bind.go).
type jsonSerializer struct {
	echo.DefaultJSONSerializer
}

var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// jsonBufferMax: larger buffers are not kept for reuse.
const jsonBufferMax = 1 << 20

// Serialize implements echo.JSONSerializer.
func (jsonSerializer) Serialize(c echo.Context, i any, indent string) error {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= jsonBufferMax {
			jsonBuffers.Put(buf)
		}
	}()
	if err := encodeJSON(buf, i, indent); err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	_, err := c.Response().Write(buf.Bytes())
	return err
}

// encodeJSON writes i and a newline to buf as encoding/json's Encoder
// does, through the value's own appender when it has one (jsonappend.go).
func encodeJSON(buf *bytes.Buffer, i any, indent string) error {
	if a, ok := i.(jsonAppender); ok && indent == "" {
		if b, ok := a.appendJSON(buf.AvailableBuffer()); ok {
			buf.Write(append(b, '\n'))
			return nil
		}
	}
	enc := json.NewEncoder(buf)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}
