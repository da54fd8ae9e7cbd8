package main

import (
	"net/http"
	"time"
)

// httpLimits bound one HTTP server's connections, so that a client that
// sends its request slowly, reads the answer slowly or keeps an idle
// connection open is closed instead of being held forever.
type httpLimits struct {
	read, write, idle *time.Duration
	maxHeader         *int
}

// addHTTPLimits registers --<prefix>-read-timeout, -write-timeout,
// -idle-timeout and -max-header-bytes.
func addHTTPLimits(s *settings, prefix string, read, write, idle time.Duration) httpLimits {
	return httpLimits{
		read:      s.Duration(prefix+"-read-timeout", read, prefix+" HTTP: longest time to read a request, body included (0: none)"),
		write:     s.Duration(prefix+"-write-timeout", write, prefix+" HTTP: longest time to write an answer (0: none)"),
		idle:      s.Duration(prefix+"-idle-timeout", idle, prefix+" HTTP: an idle keep-alive connection is closed after this"),
		maxHeader: s.Int(prefix+"-max-header-bytes", 64<<10, prefix+" HTTP: largest request header block"),
	}
}

// apply sets the limits on srv; nil fields (no flags) keep the server's.
func (l httpLimits) apply(srv *http.Server) {
	if l.read != nil {
		srv.ReadTimeout = *l.read
	}
	if l.write != nil {
		srv.WriteTimeout = *l.write
	}
	if l.idle != nil {
		srv.IdleTimeout = *l.idle
	}
	if l.maxHeader != nil {
		srv.MaxHeaderBytes = *l.maxHeader
	}
}
