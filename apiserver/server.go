// Package apiserver is ironflow's Ironic v1-compatible REST API: nodes,
// ports, drivers, provision and power verbs, and the ramdisk endpoints
// (lookup, heartbeat, continue_inspection) the agent calls. It reads and
// writes the inventory through store and starts or signals workflows through
// Engine; it never talks to a BMC or an agent itself.
package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ironflow/ironflow/console/web"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
)

// Keys of values kept on the gin context.
const (
	ctxVersion   = "ironflow.version"
	ctxRequestID = "ironflow.request_id"
	ctxUser      = "ironflow.user"
)

// headerRequestID is the request id header Ironic answers with;
// headerXRequestID mirrors it (API 1.107). Ironic's request-id middleware
// (oslo.middleware's, with Openstack-Request-Id as its compatibility
// header) sets both on every response whatever the version: 1.107 only
// announces the second.
const (
	headerRequestID  = "Openstack-Request-Id"
	headerXRequestID = "X-Openstack-Request-Id"
)

type server struct {
	cfg   Config
	store *store.Store
	eng   Engine
	log   *slog.Logger
	auth  *htpasswd
	// keystone and policy are set under the keystone strategy
	// (auth_keystone.go, policy*.go).
	keystone *keystoneAuth
	policy   *policyEngine
	router   *gin.Engine
	// table is the API's routes (routes.go); indexes the links of its
	// index documents.
	table   []route
	indexes map[string][]indexEntry
	// hbGate spares workflows the heartbeats they do not need.
	hbGate *signalGate
	// hbWrites records concurrent heartbeats in shared statements.
	hbWrites *store.MergeBatcher
	// internal: the server of a NodeOperator (rollout_operator.go), which
	// never listens; its requests name their user in headerRolloutUser.
	internal bool
}

// New builds the API handler. cfg zero fields get their defaults (start from
// DefaultConfig() to keep RestrictLookup and AgentTokenRequired on).
func New(cfg Config, st *store.Store, eng Engine, log *slog.Logger) (http.Handler, error) {
	s, err := newServer(cfg, st, eng, log)
	if err != nil {
		return nil, err
	}
	return s.routes(), nil
}

// newServer builds the API's server without its routes.
func newServer(cfg Config, st *store.Store, eng Engine, log *slog.Logger) (*server, error) {
	if st == nil || eng == nil {
		return nil, errors.New("apiserver: store and engine are required")
	}
	if log == nil {
		log = slog.Default()
	}
	log = slog.New(requestLogHandler{log.Handler()})
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, store: st, eng: eng, log: log, hbGate: newSignalGate(), hbWrites: st.NewMergeBatcher()}
	switch cfg.AuthStrategy {
	case AuthNoAuth:
	case AuthHTTPBasic:
		h, err := loadHtpasswd(cfg.HtpasswdFile)
		if err != nil {
			return nil, fmt.Errorf("apiserver: load htpasswd file: %w", err)
		}
		s.auth = h
	case AuthKeystone:
		if err := s.setupKeystone(); err != nil {
			return nil, fmt.Errorf("apiserver: %w", err)
		}
	default:
		return nil, fmt.Errorf("apiserver: unknown auth strategy %q (want %q, %q or %q)", cfg.AuthStrategy, AuthNoAuth, AuthHTTPBasic, AuthKeystone)
	}
	for _, d := range cfg.AllowedDrivers {
		if _, ok := hardware.Lookup(d); !ok {
			return nil, fmt.Errorf("apiserver: unknown driver %q in allowed drivers", d)
		}
	}
	return s, nil
}

func (s *server) routes() http.Handler {
	// Release mode: no route dump or debug warnings on stdout; our access
	// log is the structured one.
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	s.router = r
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.Use(observeRequest, s.requestIDAndLog, s.recovery)

	r.NoRoute(s.noRoute)
	r.NoMethod(func(c *gin.Context) {
		if strings.HasPrefix(c.Request.URL.Path, v1Root) {
			versionMiddleware(c)
			if c.IsAborted() {
				return
			}
		}
		// A path hidden below its version is hidden for every method.
		if rt, ok := matchRoute(s.table, c.Request.URL.Path); ok && rt.hiddenBelow(ver(c)) {
			s.writeError(c, resourceNotFound())
			return
		}
		s.writeError(c, methodNotAllowed(c.Request.Method))
	})
	s.table = s.routeTable()
	s.indexes = indexes(s.table)
	s.register(r, s.table)
	// The console pages and their websockets (docs/console.md): outside
	// Ironic's authentication, the page's token being the credential.
	consolePages := web.Handler(s.consoleTokens(), web.Options{
		NoVNCDir:       s.cfg.ConsoleNoVNCDir,
		AllowedOrigins: s.cfg.ConsoleAllowedOrigins,
		Log:            s.log.With("component", "console"),
	})

	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/console/") {
			consolePages.ServeHTTP(w, req)
			return
		}
		// Ironic serves "/v1/ports/" like "/v1/ports" (the CLI uses both).
		if p := req.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			req.URL.Path = strings.TrimRight(p, "/")
			if req.URL.Path == "" {
				req.URL.Path = "/"
			}
			req.URL.RawPath = ""
		}
		r.ServeHTTP(w, req)
	})
}

// noRoute answers unknown paths with Ironic's 404 (with the version headers
// under /v1, as Ironic's v1 controller sets them before routing).
func (s *server) noRoute(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, v1Root+"/") {
		versionMiddleware(c)
		if c.IsAborted() {
			return
		}
	}
	s.writeError(c, resourceNotFound())
}

// requestIDAndLog gives every request an id (Openstack-Request-Id), keeps
// the client's own X-OpenStack-Request-Id as its global request id (as
// Ironic does, oslo.middleware's request_id), starts its span
// (tracing.go) and writes one structured access-log line. Query strings
// are logged with any token masked.
func (s *server) requestIDAndLog(c *gin.Context) {
	start := time.Now()
	id := "req-" + uuid.NewString()
	global := globalRequestID(c)
	c.Set(ctxRequestID, id)
	if global != "" {
		c.Set(ctxGlobalRequestID, global)
	}
	c.Header(headerRequestID, id)
	c.Header(headerXRequestID, id)
	end := startRequestSpan(c, id, global)
	c.Next()
	end()
	s.log.InfoContext(c.Request.Context(), "request",
		"method", c.Request.Method,
		"path", c.Request.URL.Path,
		"query", maskQuery(c.Request.URL.RawQuery),
		"status", c.Writer.Status(),
		"duration", time.Since(start),
		"user", c.GetString(ctxUser),
	)
}

// recovery turns a panic into Ironic's 500 body; the panic value goes to the
// log only.
func (s *server) recovery(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.writeError(c, fmt.Errorf("panic: %v", p))
		}
	}()
	c.Next()
}

// checkQuery refuses query strings PostgreSQL could not compare against:
// invalid UTF-8 or NUL characters.
func (s *server) checkQuery(c *gin.Context) {
	for k, vs := range c.Request.URL.Query() {
		for _, v := range append(vs, k) {
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				s.writeError(c, badRequest("Invalid query parameter %s: not valid UTF-8 text", strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", ""), "?")))
				return
			}
		}
	}
}

// baseURL is the scheme://host of links and Location headers.
func (s *server) baseURL(c *gin.Context) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	host := c.Request.Host
	if host == "" {
		host = s.cfg.Listen
	}
	return scheme + "://" + host
}

// writeJSON answers v as JSON without HTML escaping.
func writeJSON(c *gin.Context, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeRaw(c, http.StatusInternalServerError, errorBody(http.StatusInternalServerError, "Internal Server Error"))
		return
	}
	writeRawBytes(c, status, bytes.TrimRight(buf.Bytes(), "\n"))
}

func writeRawBytes(c *gin.Context, status int, body []byte) {
	c.Header("Content-Type", "application/json")
	c.Header("Content-Length", strconv.Itoa(len(body)))
	c.Status(status)
	_, _ = c.Writer.Write(body)
}

// writeEmpty answers status with no body (202/204), optionally with a
// Location.
func writeEmpty(c *gin.Context, status int, location string) {
	if location != "" {
		c.Header("Location", location)
	}
	c.Header("Content-Length", "0")
	c.Status(status)
	c.Writer.WriteHeaderNow()
}

// parseBool accepts the spellings oslo's bool_from_string accepts.
func parseBool(name, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	return false, badRequest("Invalid value for %s: \"%s\". Must be a boolean.", name, v)
}
