package apiserver

import (
	"net/url"
	"strings"

	"github.com/ironflow/ironflow/store"
)

// masked is what every secret is shown as, as Ironic.
const masked = "******"

// Which dictionary of a node a value comes from decides what is secret in it.
type secretScope int

const (
	scopeDriverInfo secretScope = iota
	scopeInstanceInfo
	scopeDriverInternalInfo
)

// instanceInfoAlwaysMasked are instance_info keys Ironic never shows: the
// config drive (user data, keys) and the image URL it generates for the
// agent (it may be a signed temporary URL).
var instanceInfoAlwaysMasked = map[string]bool{"configdrive": true, "image_url": true}

// maskSecrets returns a copy of m with secrets replaced by "******". It is
// the one masking function used by every view of a node (node bodies,
// lookup answers, patch results). Nested dictionaries are masked too.
func maskSecrets(m map[string]any, scope secretScope) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = maskValue(k, v, scope)
	}
	return out
}

func maskValue(key string, v any, scope secretScope) any {
	if isSecretKey(key, scope) {
		if v == nil {
			return nil
		}
		return masked
	}
	switch t := v.(type) {
	case string:
		if hasURLCredentials(t) {
			return masked
		}
	case map[string]any:
		return maskSecrets(t, scope)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = maskValue("", e, scope)
		}
		return out
	}
	return v
}

func isSecretKey(key string, scope secretScope) bool {
	if key == "" {
		return false
	}
	k := strings.ToLower(key)
	switch scope {
	case scopeInstanceInfo:
		if instanceInfoAlwaysMasked[k] {
			return true
		}
	case scopeDriverInternalInfo:
		if k == store.KeyAgentToken {
			return true
		}
	}
	return strings.HasSuffix(k, "password") || strings.HasSuffix(k, "_key") ||
		strings.HasSuffix(k, "secret") || strings.HasSuffix(k, "token")
}

// hasURLCredentials reports whether s is a URL that carries a password
// ("scheme://user:pass@host/..."), as image_source URLs with basic auth do.
func hasURLCredentials(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 || !strings.Contains(s[i:], "@") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unparseable but shaped like user:pass@: hide it rather than leak.
		rest := s[i+3:]
		at := strings.Index(rest, "@")
		return at > 0 && strings.Contains(rest[:at], ":")
	}
	if u.User == nil {
		return false
	}
	_, hasPass := u.User.Password()
	return hasPass
}

// maskQuery hides agent_token values in a raw query string for logs.
func maskQuery(q string) string {
	if q == "" || !strings.Contains(strings.ToLower(q), "token") {
		return q
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, _, found := strings.Cut(p, "=")
		if found && strings.Contains(strings.ToLower(k), "token") {
			parts[i] = k + "=" + masked
		}
	}
	return strings.Join(parts, "&")
}
