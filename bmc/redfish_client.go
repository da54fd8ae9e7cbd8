package bmc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stmcginnis/gofish/common"
)

// Session cache defaults. Ironic keeps up to 1000 Redfish connections per
// conductor; idle sessions are logged out well before the 300 s session
// timeout some BMCs (Supermicro) enforce, so that a returning caller does not
// meet a dead token and the BMC's session table does not fill up.
const (
	DefaultRedfishSessionCacheSize = 1000
	DefaultRedfishSessionIdle      = 4 * time.Minute
	// DefaultRedfishLogoutTimeout bounds the DELETE of a session on eviction.
	DefaultRedfishLogoutTimeout = 10 * time.Second
	// maxRedfishBody caps what is read from one response: Redfish documents
	// are small, a runaway body must not exhaust memory.
	maxRedfishBody = 16 << 20
)

// Redfish authentication modes (driver_info redfish_auth_type).
const (
	authBasic   = "basic"
	authSession = "session"
	authAuto    = "auto"
)

// rfConn is one BMC endpoint with one set of credentials: its HTTP transport
// and, in session mode, its X-Auth-Token. It lives in the process-wide cache
// and is shared by every driver built for that BMC, so that drivers built per
// activity call reuse one session instead of logging in each time.
type rfConn struct {
	key      string
	endpoint string // scheme://host[:port]
	username string
	password string
	mode     string // requested: basic, session, auto
	http     *http.Client
	log      *slog.Logger

	mu         sync.Mutex
	basic      bool   // auto mode resolved to basic (no SessionService)
	token      string // X-Auth-Token of the live session
	sessionURI string // where to DELETE it
	gen        uint64 // bumped each time the token changes
	loginMu    sync.Mutex

	// guarded by the cache's mutex
	refs     int
	lastUsed time.Time
}

type rfCache struct {
	mu      sync.Mutex
	conns   map[string]*rfConn
	size    int
	idle    time.Duration
	logouts sync.WaitGroup
}

var redfishSessions = &rfCache{
	conns: map[string]*rfConn{},
	size:  DefaultRedfishSessionCacheSize,
	idle:  DefaultRedfishSessionIdle,
}

// CloseSessions logs out every cached Redfish session and forgets the
// connections. A worker calls it on shutdown so that BMCs do not keep
// sessions for a process that is gone.
func CloseSessions(ctx context.Context) {
	redfishSessions.mu.Lock()
	var all []*rfConn
	for k, c := range redfishSessions.conns {
		all = append(all, c)
		delete(redfishSessions.conns, k)
	}
	redfishSessions.mu.Unlock()
	for _, c := range all {
		c.logout(ctx)
	}
	redfishSessions.logouts.Wait()
}

// acquire returns the cached connection for cfg, creating it if needed, and
// evicts idle connections beyond the cache's size or age.
func (rc *rfCache) acquire(cfg *redfishConfig, log *slog.Logger) (*rfConn, error) {
	key := cfg.cacheKey()
	now := time.Now()
	rc.mu.Lock()
	c, ok := rc.conns[key]
	var evict []*rfConn
	for k, o := range rc.conns {
		if o != c && o.refs == 0 && now.Sub(o.lastUsed) > rc.idle {
			evict = append(evict, o)
			delete(rc.conns, k)
		}
	}
	if !ok {
		hc, err := cfg.httpClient()
		if err != nil {
			rc.mu.Unlock()
			return nil, err
		}
		c = &rfConn{
			key: key, endpoint: cfg.endpoint, username: cfg.username, password: cfg.password,
			mode: cfg.authType, http: hc, log: log,
		}
		// Over capacity: drop the least recently used idle connection. When
		// every connection is in use the cache grows for a while instead of
		// logging out a session a running call still holds.
		for len(rc.conns) >= rc.size {
			var lru *rfConn
			for _, o := range rc.conns {
				if o.refs == 0 && (lru == nil || o.lastUsed.Before(lru.lastUsed)) {
					lru = o
				}
			}
			if lru == nil {
				log.Warn("redfish session cache over capacity: every cached session is in use", "size", rc.size)
				break
			}
			delete(rc.conns, lru.key)
			evict = append(evict, lru)
		}
		rc.conns[key] = c
	}
	c.refs++
	c.lastUsed = now
	rc.mu.Unlock()

	for _, o := range evict {
		rc.logouts.Add(1)
		go func() {
			defer rc.logouts.Done()
			ctx, cancel := context.WithTimeout(context.Background(), DefaultRedfishLogoutTimeout)
			defer cancel()
			o.logout(ctx)
		}()
	}
	return c, nil
}

func (rc *rfCache) release(c *rfConn) {
	rc.mu.Lock()
	c.refs--
	c.lastUsed = time.Now()
	rc.mu.Unlock()
}

// logout deletes the session on the BMC (best effort: it may have expired)
// and closes idle keep-alive connections.
func (c *rfConn) logout(ctx context.Context) {
	c.mu.Lock()
	token, uri := c.token, c.sessionURI
	c.token, c.sessionURI = "", ""
	c.gen++
	c.mu.Unlock()
	defer c.http.CloseIdleConnections()
	c.deleteSession(ctx, DefaultRedfishLogoutTimeout, token, uri)
}

// deleteSession logs a session out. A refused DELETE (the session already
// expired) is fine; what must not happen is a live session left behind.
func (c *rfConn) deleteSession(ctx context.Context, timeout time.Duration, token, uri string) {
	if token == "" || uri == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.endpoint+uri, nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := c.http.Do(req)
	if err != nil {
		c.log.Warn("redfish session logout failed", "session", uri, "error", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRedfishBody))
	resp.Body.Close()
}

// auth returns the headers that authenticate a request and the token
// generation they belong to, logging in first when no session is live.
func (c *rfConn) auth(ctx context.Context, timeout time.Duration) (http.Header, uint64, error) {
	if c.username == "" {
		return http.Header{}, 0, nil
	}
	c.mu.Lock()
	basic, token, gen := c.mode == authBasic || c.basic, c.token, c.gen
	c.mu.Unlock()
	if basic {
		h := http.Header{}
		h.Set("Authorization", "Basic "+basicCredentials(c.username, c.password))
		return h, gen, nil
	}
	if token == "" {
		if err := c.login(ctx, timeout, gen); err != nil {
			return nil, 0, err
		}
		return c.auth(ctx, timeout)
	}
	h := http.Header{}
	h.Set("X-Auth-Token", token)
	return h, gen, nil
}

func basicCredentials(user, pass string) string {
	var b bytes.Buffer
	b.WriteString(user)
	b.WriteByte(':')
	b.WriteString(pass)
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// invalidate forgets the token of generation gen after the BMC refused it, so
// that the next auth logs in again, and returns it for logout (a 403 can come
// with a session that is still alive). A newer token (another call already
// logged in again) is kept.
func (c *rfConn) invalidate(gen uint64) (token, uri string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen && c.token != "" {
		token, uri = c.token, c.sessionURI
		c.token, c.sessionURI = "", ""
		c.gen++
	}
	return token, uri
}

// login creates a session. Concurrent callers wait for one login.
func (c *rfConn) login(ctx context.Context, timeout time.Duration, seenGen uint64) error {
	c.loginMu.Lock()
	defer c.loginMu.Unlock()
	c.mu.Lock()
	if c.gen != seenGen || c.token != "" || c.basic {
		c.mu.Unlock()
		return nil // someone else logged in (or fell back) meanwhile
	}
	c.mu.Unlock()

	sessionsURI, err := c.sessionsLink(ctx, timeout)
	if err != nil {
		return err
	}
	if sessionsURI == "" {
		return c.noSessions("the service root links no SessionService")
	}
	body, _ := json.Marshal(map[string]string{"UserName": c.username, "Password": c.password})
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint+sessionsURI, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: create redfish session: %v", ErrInvalidConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return deadlineError(ctx, rctx, timeout, "create redfish session", err)
	}
	payload, err := readBody(resp)
	if err != nil {
		return deadlineError(ctx, rctx, timeout, "create redfish session", err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: create redfish session as %q: HTTP %d: %s", ErrAuth, c.username, resp.StatusCode, bmcMessage(payload))
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return c.noSessions(fmt.Sprintf("POST %s answered HTTP %d", sessionsURI, resp.StatusCode))
	case resp.StatusCode >= 300:
		return httpError("create redfish session", http.MethodPost, sessionsURI, resp.StatusCode, payload)
	}
	token := resp.Header.Get("X-Auth-Token")
	if token == "" {
		return c.noSessions("session created without an X-Auth-Token")
	}
	loc := resp.Header.Get("Location")
	if u, err := url.Parse(loc); err == nil && u.Path != "" {
		loc = u.Path
	}
	c.mu.Lock()
	c.token, c.sessionURI = token, loc
	c.gen++
	c.mu.Unlock()
	c.log.Debug("redfish session created", "bmc", c.endpoint, "session", loc)
	return nil
}

// noSessions falls back to basic auth in auto mode; session mode fails.
func (c *rfConn) noSessions(why string) error {
	if c.mode == authAuto {
		c.log.Info("redfish service offers no usable sessions, using basic auth", "bmc", c.endpoint, "reason", why)
		c.mu.Lock()
		c.basic = true
		c.gen++
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%w: redfish_auth_type session: %s (use basic or auto)", ErrUnsupported, why)
}

// sessionsLink reads the session collection from the (unauthenticated)
// service root, following SessionService when Links.Sessions is absent.
func (c *rfConn) sessionsLink(ctx context.Context, timeout time.Duration) (string, error) {
	var root struct {
		SessionService common.Link
		Links          struct{ Sessions common.Link }
	}
	if err := c.getPlain(ctx, timeout, "/redfish/v1/", &root); err != nil {
		return "", err
	}
	if root.Links.Sessions != "" {
		return root.Links.Sessions.String(), nil
	}
	if root.SessionService == "" {
		return "", nil
	}
	var ss struct{ Sessions common.Link }
	if err := c.getPlain(ctx, timeout, root.SessionService.String(), &ss); err != nil {
		return "", err
	}
	return ss.Sessions.String(), nil
}

func (c *rfConn) getPlain(ctx context.Context, timeout time.Duration, path string, into any) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.endpoint+path, nil)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrInvalidConfig, path, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return deadlineError(ctx, rctx, timeout, "read redfish service root", err)
	}
	payload, err := readBody(resp)
	if err != nil {
		return deadlineError(ctx, rctx, timeout, "read redfish service root", err)
	}
	if resp.StatusCode >= 300 {
		return httpError("read redfish service root", http.MethodGet, path, resp.StatusCode, payload)
	}
	if err := json.Unmarshal(payload, into); err != nil {
		return fmt.Errorf("%w: GET %s: not a Redfish document: %v", ErrUnsupported, path, err)
	}
	return nil
}

// rfCall is the gofish client of one driver call: every request carries the
// call's context, the per-request timeout, the connection's credentials, and
// is retried on transient failures. It implements common.Client so that
// gofish's resource types (ComputerSystem, VirtualMedia) work on top of it.
type rfCall struct {
	conn          *rfConn
	ctx           context.Context
	timeout       time.Duration
	attempts      int
	retryInterval time.Duration
}

var _ common.Client = (*rfCall)(nil)

func (c *rfCall) Get(u string) (*http.Response, error) { return c.do(http.MethodGet, u, nil, nil) }
func (c *rfCall) GetWithHeaders(u string, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodGet, u, nil, h)
}
func (c *rfCall) Post(u string, p any) (*http.Response, error) {
	return c.do(http.MethodPost, u, p, nil)
}
func (c *rfCall) PostWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPost, u, p, h)
}
func (c *rfCall) PostMultipart(u string, _ map[string]io.Reader) (*http.Response, error) {
	return nil, fmt.Errorf("%w: multipart POST %s", ErrUnsupported, u)
}
func (c *rfCall) PostMultipartWithHeaders(u string, _ map[string]io.Reader, _ map[string]string) (*http.Response, error) {
	return nil, fmt.Errorf("%w: multipart POST %s", ErrUnsupported, u)
}
func (c *rfCall) Patch(u string, p any) (*http.Response, error) {
	return c.do(http.MethodPatch, u, p, nil)
}
func (c *rfCall) PatchWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPatch, u, p, h)
}
func (c *rfCall) Put(u string, p any) (*http.Response, error) { return c.do(http.MethodPut, u, p, nil) }
func (c *rfCall) PutWithHeaders(u string, p any, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodPut, u, p, h)
}
func (c *rfCall) Delete(u string) (*http.Response, error) {
	return c.do(http.MethodDelete, u, nil, nil)
}
func (c *rfCall) DeleteWithHeaders(u string, h map[string]string) (*http.Response, error) {
	return c.do(http.MethodDelete, u, nil, h)
}

// do sends one request with retries. The returned body is already read into
// memory, so the per-request timeout can end with the request.
func (c *rfCall) do(method, path string, payload any, hdr map[string]string) (_ *http.Response, err error) {
	if path == "" {
		return nil, fmt.Errorf("%w: %s without a target: the BMC's document lacks the link", ErrUnsupported, method)
	}
	var body []byte
	if payload != nil {
		if body, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	// One measure per request, its retries included (docs/metrics.md).
	start := time.Now()
	action := redfishAction(method, path)
	defer func() { observeVendor("redfish", vendorOf(c.conn.endpoint), action, start, err) }()
	for attempt := 1; ; attempt++ {
		var resp *http.Response
		var retry bool
		resp, retry, err = c.once(method, path, body, hdr)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt >= c.attempts || c.ctx.Err() != nil {
			return nil, err
		}
		c.conn.log.Info("redfish request failed, retrying", "bmc", c.conn.endpoint, "method", method,
			"path", path, "attempt", attempt, "error", err)
		t := time.NewTimer(c.retryInterval)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// once sends the request, logging in again once when the BMC refuses the
// session (expired, or dropped by a BMC reset). It says whether a retry may
// help.
func (c *rfCall) once(method, path string, body []byte, hdr map[string]string) (*http.Response, bool, error) {
	for relogin := 0; ; relogin++ {
		auth, gen, err := c.conn.auth(c.ctx, c.timeout)
		if err != nil {
			return nil, errors.Is(err, ErrBusy) || errors.Is(err, ErrUnreachable), err
		}
		status, resp, payload, err := c.send(method, path, body, hdr, auth)
		if err != nil {
			return nil, retryableNetError(method, err), netError(c.ctx, method+" "+path, err)
		}
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			if gen != 0 && auth.Get("X-Auth-Token") != "" && relogin == 0 {
				c.conn.log.Info("redfish session refused, logging in again", "bmc", c.conn.endpoint, "status", status)
				if tok, uri := c.conn.invalidate(gen); tok != "" {
					c.conn.deleteSession(c.ctx, c.timeout, tok, uri)
				}
				continue
			}
			return nil, false, fmt.Errorf("%w: %s %s as %q: HTTP %d: %s", ErrAuth, method, path, c.conn.username, status, bmcMessage(payload))
		}
		if status >= 300 {
			err := httpError("", method, path, status, payload)
			return nil, retryableStatus(method, status), err
		}
		learnVendor(c.conn.endpoint, redfishAction(method, path), payload) // vendor.go
		resp.Body = io.NopCloser(bytes.NewReader(payload))
		return resp, false, nil
	}
}

func (c *rfCall) send(method, path string, body []byte, hdr map[string]string, auth http.Header) (int, *http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = c.conn.endpoint + path
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k != "" && v != "" {
			req.Header.Set(k, v)
		}
	}
	for k, v := range auth {
		req.Header[k] = v
	}
	resp, err := c.conn.http.Do(req)
	if err != nil {
		if ctx.Err() != nil && c.ctx.Err() == nil {
			return 0, nil, nil, fmt.Errorf("no answer within %s: %w", c.timeout, err)
		}
		return 0, nil, nil, err
	}
	payload, err := io.ReadAll(io.LimitReader(resp.Body, maxRedfishBody))
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil && c.ctx.Err() == nil {
			return 0, nil, nil, fmt.Errorf("no complete answer within %s: %w", c.timeout, err)
		}
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp, payload, nil
}

// retryableNetError: a request that never reached the BMC (refused
// connection) can always be repeated; one that may have reached it only when
// repeating is harmless, which is not the case for an action (POST).
func retryableNetError(method string, err error) bool {
	var cv *tls.CertificateVerificationError
	if errors.Is(err, context.Canceled) || errors.As(err, &cv) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return method != http.MethodPost
}

// retryableStatus: 5xx and 409 are transient on BMCs (a pending BIOS job,
// a busy management processor). An action is repeated only on 503, which
// says the request was not processed.
func retryableStatus(method string, status int) bool {
	if method == http.MethodPost {
		return status == http.StatusServiceUnavailable
	}
	return status >= 500 || status == http.StatusConflict
}

// netError maps a transport failure to ErrUnreachable, naming what was done.
// An untrusted certificate is not transient: the operator must fix
// redfish_verify_ca.
func netError(ctx context.Context, what string, err error) error {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) {
		return fmt.Errorf("%w: %s: BMC certificate not trusted (set redfish_verify_ca to its CA bundle, or False): %v", ErrInvalidConfig, what, err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, what, ctx.Err())
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, what, err)
}

// readBody reads an answer's body (at most maxRedfishBody) and closes it.
// A body cut short (the deadline fell while a BMC dribbled it) is an error,
// never a document to parse.
func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, maxRedfishBody))
}

// deadlineError is netError for a request made under rctx, a deadline of
// timeout within ctx: a request that outlived it says so, as the BMC not
// answering in time (retryable, ErrUnreachable), rather than as the
// context's bare error.
func deadlineError(ctx, rctx context.Context, timeout time.Duration, what string, err error) error {
	if rctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %s: no complete answer within %s (redfish_timeout)", ErrUnreachable, what, timeout)
	}
	return netError(ctx, what, err)
}

// httpError maps an HTTP status to the typed errors, with the BMC's own
// message.
func httpError(what, method, path string, status int, payload []byte) error {
	var kind error
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		kind = ErrAuth
	case status >= 500 || status == http.StatusConflict || status == http.StatusTooManyRequests:
		kind = ErrBusy
	case status == http.StatusBadRequest || status == http.StatusNotFound ||
		status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		kind = ErrUnsupported
	default:
		kind = ErrBusy
	}
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	return &HTTPError{Status: status, err: fmt.Errorf("%w: %s%s %s: HTTP %d: %s", kind, prefix, method, path, status, bmcMessage(payload))}
}

// HTTPError is a BMC's answer with an error status, for callers that
// answer by it (a vendor passthru method passes the BMC's 400 or 404 on to
// its client); it wraps the sentinel error of the status.
type HTTPError struct {
	Status int
	err    error
}

func (e *HTTPError) Error() string { return e.err.Error() }
func (e *HTTPError) Unwrap() error { return e.err }

// bmcMessage extracts the Redfish error message (and its extended info)
// from a response body, falling back to the start of the raw text.
func bmcMessage(payload []byte) string {
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				MessageID string `json:"MessageId"`
				Message   string
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(payload, &e) == nil && (e.Error.Message != "" || len(e.Error.Extended) > 0) {
		parts := []string{}
		if e.Error.Message != "" {
			parts = append(parts, e.Error.Message)
		}
		for _, x := range e.Error.Extended {
			if x.Message != "" {
				parts = append(parts, x.Message)
			} else if x.MessageID != "" {
				parts = append(parts, x.MessageID)
			}
		}
		return strings.Join(parts, "; ")
	}
	s := strings.TrimSpace(string(payload))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// cacheKey identifies a BMC and credentials. The password enters as a
// digest so that a corrected password gets a fresh login while the key
// itself never holds the secret.
func (cfg *redfishConfig) cacheKey() string {
	sum := sha256.Sum256([]byte(cfg.password))
	return strings.Join([]string{cfg.endpoint, cfg.username, hex.EncodeToString(sum[:8]),
		cfg.authType, fmt.Sprint(cfg.verify), cfg.caPath}, "\x00")
}

// httpClient builds the transport for a BMC: keep-alive on (sessions are
// cheap, TLS handshakes with BMCs are not), certificate checks as asked.
func (cfg *redfishConfig) httpClient() (*http.Client, error) {
	tlsCfg := &tls.Config{InsecureSkipVerify: !cfg.verify} //nolint:gosec // the operator chose redfish_verify_ca=False
	if cfg.caPath != "" {
		pem, err := os.ReadFile(cfg.caPath)
		if err != nil {
			return nil, fmt.Errorf("%w: redfish_verify_ca %q: %v", ErrInvalidConfig, cfg.caPath, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: redfish_verify_ca %q holds no PEM certificate", ErrInvalidConfig, cfg.caPath)
		}
		tlsCfg.RootCAs = pool
		tlsCfg.InsecureSkipVerify = false
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: cfg.timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: cfg.timeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
	}
	return &http.Client{Transport: tr}, nil
}
