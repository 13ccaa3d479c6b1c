package console

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIdent: an id is its name when it has one, else its tail, which
// tells apart UUIDv7 ids of one millisecond (same first 12 hex digits);
// the full id is in the title; both are escaped.
func TestIdent(t *testing.T) {
	a, b := "01938a2b-7c00-7abc-8def-0123456789ab", "01938a2b-7c00-7abc-9fed-ba9876543210"
	assert.Equal(t, a[:8], b[:8])
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a)))
	assert.Equal(t, `<code class="ident" title="`+b+`">…76543210</code>`, string(ident(b)))
	assert.Equal(t, `<span class="ident" title="`+a+`">nightly</span>`, string(ident(a, "nightly")))
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a, "")), "an empty name is no name")
	assert.Equal(t, `<span class="ident" title="&lt;x&gt;">&lt;b&gt;</span>`, string(ident("<x>", "<b>")))
	assert.Equal(t, `<code class="ident" title="short">short</code>`, string(ident("short")))
}
