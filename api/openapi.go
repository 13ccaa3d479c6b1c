package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/openapi"
)

// serveOpenAPI returns the handler of GET /openapi.json: the embedded
// OpenAPI 3 document. It changes only with the binary, so it carries an
// ETag and http.ServeContent answers If-None-Match with 304. The route is
// deliberately not described in the document itself.
func serveOpenAPI() echo.HandlerFunc {
	spec := openapi.Spec()
	sum := sha256.Sum256(spec)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		h.Set(echo.HeaderCacheControl, "public, max-age=300")
		h.Set("ETag", etag)
		http.ServeContent(c.Response(), c.Request(), "openapi.json", time.Time{}, bytes.NewReader(spec))
		return nil
	}
}
