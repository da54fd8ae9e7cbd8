package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// bridge serves a console websocket: after the origin and the token pass, it
// dials the worker's endpoint and copies bytes both ways until either side
// closes, the session idles out or the browser sends more than
// MaxMessageBytes at once. Serial output and RFB server messages go to the
// browser as binary messages; what the browser sends (xterm.js sends typed
// text as text messages, noVNC binary ones) goes to the endpoint as bytes.
func (s *server) bridge(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !isUpgrade(r) {
			writeError(w, http.StatusBadRequest, "This console URL takes a websocket; open the console's page instead.")
			return
		}
		if !s.originAllowed(r) {
			s.res.Rejected(r.Context(), r.URL.Query().Get("token"), kind, r.RemoteAddr, errBadOrigin)
			writeError(w, http.StatusForbidden, "The request's Origin is not allowed to open this console.")
			return
		}
		t, ok := s.resolve(w, r, kind)
		if !ok {
			return
		}
		// Dial before upgrading, so that a console the worker does not
		// serve (disabled meanwhile, worker down) is an HTTP answer.
		d := net.Dialer{Timeout: s.opt.DialTimeout}
		tcp, err := d.DialContext(r.Context(), "tcp", t.Addr)
		if err != nil {
			s.opt.Log.Warn("console endpoint unreachable", "node", t.NodeUUID, "kind", kind, "err", err)
			writeError(w, http.StatusServiceUnavailable, "The console of node "+t.NodeUUID+" is not available.")
			return
		}
		defer tcp.Close()
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			// noVNC asks for "binary" on some releases; a browser fails a
			// websocket whose server does not echo a protocol it asked for.
			Subprotocols: []string{"binary"},
			// Checked above with Ironic's error body.
			InsecureSkipVerify: true,
			CompressionMode:    websocket.CompressionDisabled,
		})
		if err != nil {
			return // Accept answered the bad handshake
		}
		ws.SetReadLimit(s.opt.MaxMessageBytes)
		s.opt.Log.Info("console session opened", "node", t.NodeUUID, "kind", kind, "remote", r.RemoteAddr)
		why := s.copyBoth(r.Context(), ws, tcp)
		s.opt.Log.Info("console session closed", "node", t.NodeUUID, "kind", kind, "remote", r.RemoteAddr, "why", why)
	}
}

// isUpgrade: the request asks for a websocket (RFC 6455 section 4.1).
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// Close reasons the browser sees.
const (
	reasonEndpointClosed = "console closed"
	reasonIdle           = "console idle"
)

// copyBoth runs the session and says why it ended.
func (s *server) copyBoth(ctx context.Context, ws *websocket.Conn, tcp net.Conn) string {
	var last atomic.Int64
	touch := func() { last.Store(time.Now().UnixNano()) }
	touch()
	var (
		once sync.Once
		why  string
		wg   sync.WaitGroup
	)
	end := func(code websocket.StatusCode, reason string) {
		once.Do(func() {
			why = reason
			tcp.Close()
			// Close sends the close frame and waits (bounded) for the
			// browser's, which ends the pending Read; run it aside so that
			// the copy that called end returns now. ctx is not cancelled:
			// a Read whose context ends drops the connection without the
			// close frame, and the browser would see 1006 for a clean end.
			wg.Add(1)
			go func() { defer wg.Done(); ws.Close(code, reason) }()
		})
	}

	wg.Add(2)
	go func() { // endpoint → browser
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := tcp.Read(buf)
			if n > 0 {
				touch()
				wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
				werr := ws.Write(wctx, websocket.MessageBinary, buf[:n])
				wcancel()
				if werr != nil {
					end(websocket.StatusGoingAway, "browser write failed")
					return
				}
			}
			if err != nil {
				end(websocket.StatusNormalClosure, reasonEndpointClosed)
				return
			}
		}
	}()
	go func() { // browser → endpoint
		defer wg.Done()
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				reason := "browser closed"
				code := websocket.StatusNormalClosure
				if errors.Is(err, websocket.ErrMessageTooBig) || websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
					reason, code = "message too big", websocket.StatusMessageTooBig
				}
				end(code, reason)
				return
			}
			touch()
			if _, err := tcp.Write(data); err != nil {
				end(websocket.StatusNormalClosure, reasonEndpointClosed)
				return
			}
		}
	}()

	tick := time.NewTicker(idleCheck(s.opt.IdleTimeout))
	defer tick.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return why
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) >= s.opt.IdleTimeout {
				end(websocket.StatusPolicyViolation, reasonIdle)
			}
		}
	}
}

// idleCheck is how often the idle timeout is looked at: a tenth of it,
// within [10ms, 10s].
func idleCheck(idle time.Duration) time.Duration {
	return min(max(idle/10, 10*time.Millisecond), 10*time.Second)
}
