package payload

import (
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds a codec request: the Web UI sends the payloads of
// one event or one workflow at a time, each under Temporal's 2 MiB blob
// limit by default.
const MaxRequestBytes = 16 << 20

// Authenticator answers whether a request's credentials are an operator's.
type Authenticator interface {
	Authenticate(r *http.Request) bool
}

// ServerConfig configures the codec endpoint.
type ServerConfig struct {
	// Auth checks every /encode and /decode request; nil only when the
	// caller decided to run without authentication (loopback dev).
	Auth Authenticator
	// Realm is the Basic realm of a 401's WWW-Authenticate.
	Realm string
	// AllowedOrigins are the Web UI origins (scheme://host:port) the
	// browser may call from (CORS); a request from another origin gets no
	// CORS headers, so the browser refuses its answer.
	AllowedOrigins []string
	// Namespace, when set, is the only X-Namespace served: the keys are
	// ironflow's, not another tenant's.
	Namespace string
}

// Handler is the Temporal codec server protocol (the Web UI's and the
// temporal CLI's --codec-endpoint): POST {endpoint}/encode and
// {endpoint}/decode with {"payloads": [...]}, the namespace in
// X-Namespace, CORS preflights answered without credentials, as browsers
// send them.
func Handler(c *Codec, cfg ServerConfig) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(cfg.AllowedOrigins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/encode") && !strings.HasSuffix(r.URL.Path, "/decode") {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST, OPTIONS")
			http.Error(w, "method not allowed: POST payloads to /encode or /decode", http.StatusMethodNotAllowed)
			return
		}
		if cfg.Auth != nil && !cfg.Auth.Authenticate(r) {
			realm := cfg.Realm
			if realm == "" {
				realm = "ironflow codec server"
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
			http.Error(w, "authorization required", http.StatusUnauthorized)
			return
		}
		if ns := r.Header.Get("X-Namespace"); cfg.Namespace != "" && ns != "" && ns != cfg.Namespace {
			http.Error(w, "this codec server holds the keys of namespace "+cfg.Namespace+", not "+ns, http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		codec.ServeHTTP(w, r)
	})
}
