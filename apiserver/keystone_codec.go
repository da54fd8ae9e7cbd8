package apiserver

import (
	"net/http"
	"strings"
)

// KeystoneAuth checks a request's Keystone token with the keystone
// strategy's validator (same service user, cache and revocation window),
// for the endpoints that share the API's operators but not its policy: the
// payload codec server. Decoded payloads cover every project's nodes, so
// only a system-scoped token with one of Ironic's system roles passes
// (Ironic's default policy: system_reader, implied by member and admin).
type KeystoneAuth struct{ k *keystoneAuth }

// NewKeystoneAuth prepares the validator; Keystone is first asked on the
// first request.
func NewKeystoneAuth(cfg KeystoneConfig) (*KeystoneAuth, error) {
	k, err := newKeystoneAuth(cfg)
	if err != nil {
		return nil, err
	}
	return &KeystoneAuth{k: k}, nil
}

// Authenticate reports whether r carries a valid system-scoped token in
// X-Auth-Token, or as "Authorization: Bearer <token>" (what the Temporal
// Web UI's codec.passAccessToken and the temporal CLI's --codec-auth send).
// Keystone unreachable: refused.
func (a *KeystoneAuth) Authenticate(r *http.Request) bool {
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
			token = strings.TrimSpace(h[7:])
		}
	}
	if token == "" {
		return false
	}
	cr, err := a.k.validate(r.Context(), token)
	if err != nil || cr == nil || cr.SystemScope != "all" {
		return false
	}
	return cr.hasRole("reader") || cr.hasRole("member") || cr.hasRole("admin")
}
