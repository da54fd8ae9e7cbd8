package bmo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Call is one request the client sent and the status it got.
type Call struct {
	Method string
	// Path is the URL path as sent (escaped), Query its raw query.
	Path, Query string
	// Version is the X-OpenStack-Ironic-API-Version header ("" if absent).
	Version string
	// Body is the decoded JSON body (nil without one).
	Body any
	// Status is the answer's HTTP status (0 when the request failed).
	Status int
	// Pass is the reconcile pass the call belongs to (NextPass).
	Pass int
}

// Recorder is an http.RoundTripper that records every call it passes on.
type Recorder struct {
	Next  http.RoundTripper
	mu    sync.Mutex
	calls []Call
	pass  int
}

// NextPass marks the start of a reconcile pass: the calls after it carry
// its number.
func (r *Recorder) NextPass() {
	r.mu.Lock()
	r.pass++
	r.mu.Unlock()
}

// RoundTrip records req and sends it on.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c := Call{Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.RawQuery,
		Version: req.Header.Get("X-OpenStack-Ironic-API-Version")}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if len(b) > 0 {
			_ = json.Unmarshal(b, &c.Body)
		}
	}
	next := r.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err == nil {
		c.Status = resp.StatusCode
	}
	r.mu.Lock()
	c.Pass = r.pass
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

// Take returns the calls recorded since the last Take and forgets them.
func (r *Recorder) Take() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}
