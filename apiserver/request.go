package apiserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
)

// maxBodyBytes bounds request bodies: a config drive is the largest thing a
// client sends (Ironic caps it at 64 MiB).
const maxBodyBytes = 64 << 20

// Body limits of the routes the agent calls, which anyone on the
// provisioning network reaches: they are read before the token is checked,
// so they are kept small.
const (
	maxHeartbeatBytes  = 1 << 20
	maxInspectionBytes = 8 << 20
)

func readBody(c *gin.Context) ([]byte, error) { return readBodyLimit(c, maxBodyBytes) }

// readBodyLimit reads a body of at most limit bytes; a larger one is 413,
// refused on its Content-Length before anything is read when it sends one.
func readBodyLimit(c *gin.Context, limit int64) ([]byte, error) {
	tooLarge := errorf(http.StatusRequestEntityTooLarge, "Request body is larger than %d bytes.", limit)
	if c.Request.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if err != nil {
		return nil, badRequest("Could not read the request body: %s", err.Error())
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if ct := c.ContentType(); !isJSONType(ct) {
			return nil, errorf(http.StatusUnsupportedMediaType, "The request body's content type %q is not supported: send application/json.", ct)
		}
	}
	return body, nil
}

// isJSONType reports whether a body of media type ct (parameters already
// stripped) is decoded as JSON. Every body of Ironic's API is JSON; a
// client that names no type is read as JSON, as Ironic does.
func isJSONType(ct string) bool {
	ct = strings.ToLower(ct)
	return ct == "" || ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// decodeObject decodes a JSON object body.
func decodeObject(c *gin.Context) (map[string]any, error) {
	return decodeObjectLimit(c, maxBodyBytes)
}

// decodeObjectLimit decodes a JSON object body of at most limit bytes.
func decodeObjectLimit(c *gin.Context, limit int64) (map[string]any, error) {
	body, err := readBodyLimit(c, limit)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := decodeJSON(body, &v); err != nil {
		return nil, badRequest("Invalid JSON in request body: %s", err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("Invalid request body: expected a JSON object, got %s", pyliteral.Repr(v))
	}
	return m, nil
}

// normalizeNumbers turns json.Number into int64 or float64 so that values
// stored in JSONB are plain numbers.
func normalizeNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64() // decodeJSON refused what does not fit
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = normalizeNumbers(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalizeNumbers(e)
		}
		return t
	}
	return v
}

// deepCopy copies a decoded JSON value so that patching never aliases the
// node read from the store.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
