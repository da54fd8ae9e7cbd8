package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironflow/ironflow/pyliteral"
)

// Console kinds, as tokens are bound to them.
const (
	KindSerial    = "serial"
	KindGraphical = "graphical"
)

// ErrBadToken is what a Resolver returns for a token that is unknown,
// expired, revoked or bound to another kind: the request is answered 401.
var ErrBadToken = errors.New("console token is invalid or has expired")

// errBadOrigin is the why given to Resolver.Rejected when a page of another
// origin tried to open a console websocket.
var errBadOrigin = errors.New("websocket origin is not allowed")

// Target is where a token leads: the worker's endpoint for one node's console.
type Target struct {
	NodeUUID string
	Kind     string // KindSerial or KindGraphical
	Addr     string // host:port of the worker's TCP endpoint
}

// Resolver checks console tokens. The console package implements it on the
// store.
type Resolver interface {
	// Resolve checks a token for the kind asked; an unknown, expired or
	// revoked token is ErrBadToken.
	Resolve(ctx context.Context, token, kind string) (Target, error)
	// Rejected records a refused attempt (node history when the token names
	// a node).
	Rejected(ctx context.Context, token, kind, remote string, why error)
}

// Defaults of Options' zero fields.
const (
	DefaultNoVNCDir        = "/usr/share/novnc"
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultMaxMessageBytes = 64 << 10
	DefaultDialTimeout     = 10 * time.Second
	// writeTimeout bounds one write to the browser: a browser that stops
	// reading ends its session rather than holding the endpoint.
	writeTimeout = 30 * time.Second
)

// Options tune the handlers; the zero value is usable.
type Options struct {
	// NoVNCDir holds Debian's novnc files (core/rfb.js below it). When it
	// does not, the noVNC page answers 503 with a page saying so.
	NoVNCDir string
	// AllowedOrigins are host[:port] patterns (path.Match syntax, as
	// "*.example.com") of pages other than the API's own that may open the
	// websockets. A browser always sends Origin; a request without one
	// (a command-line client) is not a cross-site request and is allowed.
	AllowedOrigins []string
	// IdleTimeout closes a session with no traffic either way for this long.
	IdleTimeout time.Duration
	// MaxMessageBytes is the largest websocket message a browser may send
	// (keystrokes, RFB client messages); a larger one closes the session.
	MaxMessageBytes int64
	// DialTimeout bounds the connection to the worker's endpoint.
	DialTimeout time.Duration
	// Log receives session opened/closed lines (node, kind, remote; never
	// the token or the traffic). Nil is slog.Default().
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.NoVNCDir == "" {
		o.NoVNCDir = DefaultNoVNCDir
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Prefix is the path below which Handler serves.
const Prefix = "/console/"

// Handler serves every path of the package documentation. Mount it at
// Prefix: http.ServeMux.Handle(web.Prefix, h), or with gin
// r.Any("/console/*path", gin.WrapH(h)).
func Handler(res Resolver, o Options) http.Handler {
	s := &server{res: res, opt: o.withDefaults()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/terminal", s.page(KindSerial, "terminal.html", false))
	mux.HandleFunc("GET /console/vnc", s.page(KindGraphical, "vnc.html", true))
	mux.HandleFunc("GET /console/terminal/ws", s.bridge(KindSerial))
	mux.HandleFunc("GET /console/vnc/ws", s.bridge(KindGraphical))
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", files(assetFS())))
	mux.Handle("GET /console/novnc/", http.StripPrefix("/console/novnc/", files(os.DirFS(s.opt.NoVNCDir))))
	// The paths above with another method: Ironic's 405.
	for _, p := range []string{"/console/terminal", "/console/vnc", "/console/terminal/ws", "/console/vnc/ws"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "The method "+r.Method+" is not allowed for this resource.")
		})
	}
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Resource could not be found.")
	})
	return securityHeaders(mux)
}

// Register mounts Handler on mux at Prefix.
func Register(mux *http.ServeMux, res Resolver, o Options) {
	mux.Handle(Prefix, Handler(res, o))
}

type server struct {
	res Resolver
	opt Options
}

// resolve checks the request's token for kind, answering 401 (and telling
// the Resolver) when it is bad and 503 when the Resolver cannot tell.
func (s *server) resolve(w http.ResponseWriter, r *http.Request, kind string) (Target, bool) {
	token := r.URL.Query().Get("token")
	var t Target
	err := ErrBadToken
	if token != "" {
		t, err = s.res.Resolve(r.Context(), token, kind)
	}
	switch {
	case err == nil && t.Kind != "" && t.Kind != kind:
		err = ErrBadToken // a Resolver that ignored kind
	case err == nil:
		return t, true
	}
	if errors.Is(err, ErrBadToken) {
		s.res.Rejected(r.Context(), token, kind, r.RemoteAddr, err)
		writeError(w, http.StatusUnauthorized, "The console token is invalid or has expired.")
		return Target{}, false
	}
	s.opt.Log.Error("resolve console token", "kind", kind, "err", err)
	writeError(w, http.StatusServiceUnavailable, "The console service is not available.")
	return Target{}, false
}

// originAllowed is the websocket's defence against another site's page
// opening a console in its visitor's browser (RFC 6455 section 10.2): the
// Origin must be the API's own host or one of AllowedOrigins.
func (s *server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range s.opt.AllowedOrigins {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

// page serves an embedded console page after checking its token, so that a
// stale link shows Ironic's 401 rather than a console that never connects.
func (s *server) page(kind, name string, needsNoVNC bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.resolve(w, r, kind); !ok {
			return
		}
		if needsNoVNC {
			if _, err := os.Stat(filepath.Join(s.opt.NoVNCDir, "core", "rfb.js")); err != nil {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, noVNCMissing, s.opt.NoVNCDir)
				return
			}
		}
		body, err := assets.ReadFile("assets/" + name)
		if err != nil { // embedded: cannot happen in a built binary
			writeError(w, http.StatusInternalServerError, "The console page is missing.")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", pageCSP)
		w.Write(body)
	}
}

// pageCSP keeps the pages to their own origin's scripts and websockets;
// xterm.js adds <style> elements for its theme, hence 'unsafe-inline' for
// styles only. frame-ancestors: no other site may frame a console and lure
// keystrokes into it.
const pageCSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const noVNCMissing = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Graphical console unavailable</title></head>
<body><h1>Graphical console unavailable</h1>
<p>This ironflow API serves the noVNC client from %s, which does not hold noVNC
(core/rfb.js). Install Debian's <code>novnc</code> package on the API host
(scripts/install-deps.sh run does) or set the console's noVNC directory; see
docs/console.md.</p></body></html>
`

// securityHeaders: console URLs carry tokens, so nothing is cached and no
// page sends its URL on as a Referer.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// files serves the regular files of fsys, and Ironic's 404 for anything
// else (http.FileServer would list directories and answer plain text).
func files(fsys fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		if st, err := fs.Stat(fsys, name); err != nil || !st.Mode().IsRegular() {
			writeError(w, http.StatusNotFound, "Resource could not be found.")
			return
		}
		http.ServeFileFS(w, r, fsys, name)
	})
}

// writeError answers Ironic's double-encoded error body (the API's
// apiserver/errors.go shape): error_message is a JSON string holding
// {faultcode, faultstring, debuginfo}.
func writeError(w http.ResponseWriter, status int, msg string) {
	fault := "Client"
	if status >= 500 {
		fault = "Server"
	}
	inner := `{"faultcode": ` + pyliteral.JSONString(fault) + `, "faultstring": ` + pyliteral.JSONString(msg) + `, "debuginfo": null}`
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"error_message": ` + pyliteral.JSONString(inner) + `}`))
}
