package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// stepArgs reads a step's args, with the node's driver_internal_info keys
// Ironic fills from its [deploy] options as the fallback
// (agent_enable_ata_secure_erase ...), then the default.
type stepArgs struct {
	args map[string]any
	dii  map[string]any
	err  error
}

func newStepArgs(args, node map[string]any) *stepArgs {
	dii, _ := node["driver_internal_info"].(map[string]any)
	return &stepArgs{args: args, dii: dii}
}

func (s *stepArgs) lookup(name, iiKey string) (any, bool) {
	if v, ok := s.args[name]; ok && v != nil {
		return v, true
	}
	if iiKey != "" {
		if v, ok := s.dii[iiKey]; ok && v != nil {
			return v, true
		}
	}
	return nil, false
}

func (s *stepArgs) fail(name string, v any, want string) {
	if s.err == nil {
		s.err = newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf("argument %s: %v is not %s", name, v, want))
	}
}

func (s *stepArgs) boolean(name, iiKey string, def bool) bool {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	switch t := v.(type) {
	case bool:
		return t
	case string:
		if b, err := strconv.ParseBool(strings.ToLower(t)); err == nil {
			return b
		}
	}
	s.fail(name, v, "a boolean")
	return def
}

func (s *stepArgs) integer(name, iiKey string, def int64) int64 {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	var n int64
	switch t := v.(type) {
	case float64:
		n = int64(t)
		if float64(n) != t {
			s.fail(name, v, "an integer")
			return def
		}
	case json.Number:
		var err error
		if n, err = t.Int64(); err != nil {
			s.fail(name, v, "an integer")
			return def
		}
	case string:
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(t), 10, 64); err != nil {
			s.fail(name, v, "an integer")
			return def
		}
	case int:
		n = int64(t)
	case int64:
		n = t
	default:
		s.fail(name, v, "an integer")
		return def
	}
	if n < 0 {
		s.fail(name, v, "a non-negative integer")
		return def
	}
	return n
}

func (s *stepArgs) seconds(name, iiKey string, def time.Duration) time.Duration {
	return time.Duration(s.integer(name, iiKey, int64(def/time.Second))) * time.Second
}

func (s *stepArgs) str(name, iiKey, def string) string {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	t, ok := v.(string)
	if !ok {
		s.fail(name, v, "a string")
		return def
	}
	return t
}

// strings accepts a list of strings or one string.
func (s *stepArgs) strings(name string, def []string) []string {
	v, ok := s.lookup(name, "")
	if !ok {
		return def
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			str, ok := e.(string)
			if !ok {
				s.fail(name, v, "a list of strings")
				return def
			}
			out = append(out, str)
		}
		return out
	case []string:
		return t
	}
	s.fail(name, v, "a list of strings")
	return def
}
