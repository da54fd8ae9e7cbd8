package apiserver

import (
	"strings"
	"testing"
)

// Python's json module writes Infinity and NaN, which are not JSON: the
// body is refused, and the error says what the client did and how to send
// the value instead.
func TestNonFiniteNumbersAreExplained(t *testing.T) {
	for _, body := range []string{
		`{"driver_info": {"redfish_password": Infinity}}`,
		`{"driver_info": {"redfish_password": -Infinity}}`,
		`{"extra": {"x": NaN}}`,
		`[{"op": "add", "path": "/extra/x", "value": Infinity}]`,
	} {
		var v any
		err := decodeJSON([]byte(body), &v)
		if err == nil {
			t.Errorf("%s: decoded as %v, want an error", body, v)
			continue
		}
		if !strings.Contains(err.Error(), "is not a JSON number") || !strings.Contains(err.Error(), "send the value as a string") {
			t.Errorf("%s: error %q lacks the hint", body, err)
		}
	}
	var v any
	err := decodeJSON([]byte(`{"name": Indeed}`), &v)
	if err == nil || strings.Contains(err.Error(), "JSON number") {
		t.Errorf("a bare word that is not Infinity: %v, want a plain syntax error", err)
	}
}
