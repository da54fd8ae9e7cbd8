package apiserver

import "net/http"

// BasicAuth checks a request's HTTP Basic credentials against an htpasswd
// file as the API's http_basic strategy does, for the other endpoints that
// share the API's operators (the payload codec server).
type BasicAuth struct{ h *htpasswd }

// LoadBasicAuth reads a bcrypt htpasswd file (htpasswd -B).
func LoadBasicAuth(path string) (*BasicAuth, error) {
	h, err := loadHtpasswd(path)
	if err != nil {
		return nil, err
	}
	return &BasicAuth{h: h}, nil
}

// Authenticate reports whether r carries a known user's password.
func (b *BasicAuth) Authenticate(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	return ok && b.h.check(user, pass)
}
