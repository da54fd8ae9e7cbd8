package pyliteral

import (
	"encoding/json"
	"testing"
)

// Python's json.dumps with ensure_ascii, as Ironic's error bodies are.
func TestJSONString(t *testing.T) {
	cases := map[string]string{
		"plain":              `"plain"`,
		`a "q" \ b`:          `"a \"q\" \\ b"`,
		"tab\tnl\n":          `"tab\tnl\n"`,
		"é":                  `"\u00e9"`,
		"\U0001F600":         `"\ud83d\ude00"`,
		"<html>&":            `"<html>&"`,
		"\x01":               `"\u0001"`,
		string([]byte{0xff}): `"\ufffd"`,
	}
	for in, want := range cases {
		if got := JSONString(in); got != want {
			t.Errorf("JSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

// Python's repr() of what a client sent: a json.Number keeps the kind it
// was written in, a float64 is a float; ReprDecoded takes a whole float64
// for the int the JSON held.
func TestRepr(t *testing.T) {
	v := map[string]any{"b": []any{json.Number("1"), json.Number("1.0"), 2.0, 2.5, nil, true}, "a": "it's"}
	if got, want := Repr(v), `{'a': "it's", 'b': [1, 1.0, 2.0, 2.5, None, True]}`; got != want {
		t.Errorf("Repr = %s, want %s", got, want)
	}
	d := map[string]any{"n": []any{2.0, 2.5, "x\\y'z\""}}
	if got, want := ReprDecoded(d), `{'n': [2, 2.5, 'x\\y\'z"']}`; got != want {
		t.Errorf("ReprDecoded = %s, want %s", got, want)
	}
	if got := Float(3); got != "3.0" {
		t.Errorf("Float(3) = %s, want 3.0", got)
	}
}

// str(), a list's repr and bool() as Python answers them.
func TestStrListTruthy(t *testing.T) {
	if Str("plain") != "plain" || Str(json.Number("4")) != "4" || Str(nil) != "None" {
		t.Errorf("Str: %q %q %q", Str("plain"), Str(json.Number("4")), Str(nil))
	}
	if got := List([]string{"ipmi", "redfish"}); got != "['ipmi', 'redfish']" {
		t.Errorf("List = %s", got)
	}
	for v, want := range map[any]bool{"": false, "x": true, 0.0: false, json.Number("0"): false, json.Number("2"): true, nil: false, true: true} {
		if Truthy(v) != want {
			t.Errorf("Truthy(%#v) = %v, want %v", v, !want, want)
		}
	}
	if Truthy([]any{}) || !Truthy(map[string]any{"a": 1}) {
		t.Error("Truthy of an empty list or a non-empty dict is wrong")
	}
}
