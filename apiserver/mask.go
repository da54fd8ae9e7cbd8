package apiserver

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

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
		return maskPassword(t)
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
	if strings.HasSuffix(k, "_key") {
		return true
	}
	for _, s := range sanitizeKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// sanitizeKeys are the names oslo.utils' strutils (which Ironic's
// mask_dict_password and mask_password use) treats as secret: a key that
// contains any of them is masked whole, and "name=value" or "name": "value"
// inside a string has its value masked.
var sanitizeKeys = []string{
	"adminpass", "admin_pass", "password", "admin_password", "auth_token",
	"new_pass", "auth_password", "secret_uuid", "secret", "sys_pswd", "token",
	"configdrive", "chappassword", "encrypted_key", "private_key", "fernetkey",
	"sslkey", "passphrase", "cephxkey", "keystonekey", "keystonepasswd",
	"passwd", "cryptkey", "cryptpasswd", "cryptpswd", "cryptpw", "api_key",
	"apikey", "secretkey", "secret_key", "root_password_hash",
}

// passwordInText finds "key=value", "key: value" and "key": "value" for the
// keys above, as strutils.mask_password's patterns do.
var passwordInText = func() *regexp.Regexp {
	names := strings.Join(sanitizeKeys, "|")
	return regexp.MustCompile(`(?i)((?:` + names + `)[A-Za-z0-9_]*["']?\s*[=:]\s*["']?)([^\s"'&,;}]+)`)
}()

// maskPassword masks the values of secret names inside a free-form string
// (a kernel command line, a connection string), leaving the rest readable.
func maskPassword(s string) string {
	if !mayNameASecret(s) || !passwordInText.MatchString(s) {
		return s
	}
	return passwordInText.ReplaceAllString(s, "${1}"+masked)
}

// mayNameASecret is a cheap test that passwordInText cannot match s: a
// match needs one of sanitizeKeys (in any case) and a "=" or ":" after it.
// Most values of a node (addresses, URLs, sizes) name no secret, and the
// case-insensitive alternation costs a backtracking pass over each of them:
// a quarter of the CPU of a detailed list of 10,000 nodes. A string with a
// byte outside ASCII goes to the regular expression, whose case folding is
// Unicode's ("ſ" matches "s"), not strings.ToLower's.
func mayNameASecret(s string) bool {
	if !strings.ContainsAny(s, "=:") {
		return false
	}
	upper := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return true
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	if upper {
		s = strings.ToLower(s)
	}
	for _, k := range sanitizeKeys {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
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
