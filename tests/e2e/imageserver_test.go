package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// imageServer serves one disk image inside a lab, as an operator's image
// store would, and tells the test what the agents asked of it: how many
// GETs each image had and, when a hold is armed, the moment a download is
// half way through — so a scenario can crash something while an agent is
// writing, at a point it knows, instead of guessing with a sleep.
type imageServer struct {
	t    testing.TB
	path string
	srv  *http.Server
	// URL is the image's address as the lab's machines reach it.
	URL string

	mu    sync.Mutex
	gets  int
	hold  *downloadHold
	notes []string
}

// downloadHold stops the next download after `at` bytes until released.
type downloadHold struct {
	at      int64
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// imageServerPort is where the test's own image server listens in the lab.
const imageServerPort = 8090

// serveImage serves path at http://LabAddress:imageServerPort/<name> from a
// listener created inside the lab's namespace, until the test ends.
func serveImage(t testing.TB, lab *Lab, path, name string) *imageServer {
	t.Helper()
	l, err := listenInLab(lab, imageServerPort)
	if err != nil {
		t.Fatalf("image server: %v", err)
	}
	s := &imageServer{t: t, path: path, URL: fmt.Sprintf("http://%s:%d/%s", LabAddress, imageServerPort, name)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+name, s.serve)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(func() {
		s.releaseHold()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(ctx)
	})
	return s
}

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
	f, err := os.Open(s.path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.gets++
	hold := s.hold
	s.hold = nil
	s.notes = append(s.notes, fmt.Sprintf("GET #%d from %s range=%q", s.gets, r.RemoteAddr, r.Header.Get("Range")))
	s.mu.Unlock()
	var out http.ResponseWriter = w
	if hold != nil {
		out = &holdingWriter{ResponseWriter: w, hold: hold, ctx: r.Context()}
	}
	http.ServeContent(out, r, "", st.ModTime(), f)
}

// listenInLab is a TCP listener on LabAddress:port created inside the lab's
// namespace, for a server of the test that the lab's machines reach.
func listenInLab(lab *Lab, port int) (net.Listener, error) {
	fd, err := lab.socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("socket in %s: %w", lab.Netns, err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], net.ParseIP(LabAddress).To4())
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bind %s:%d: %w", LabAddress, port, err)
	}
	if err := syscall.Listen(fd, 16); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: %w", err)
	}
	f := os.NewFile(uintptr(fd), "lab-listener")
	defer f.Close()
	return net.FileListener(f)
}

// Gets is the number of GET requests the image has had.
func (s *imageServer) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// Requests describes every request so far, for failure messages and logs.
func (s *imageServer) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

// HoldNextDownload makes the next GET stop after half of the image until
// the returned release is called; reached closes when it stops there.
func (s *imageServer) HoldNextDownload() (reached <-chan struct{}, release func()) {
	st, err := os.Stat(s.path)
	if err != nil {
		s.t.Fatalf("image server: %v", err)
	}
	h := &downloadHold{at: st.Size() / 2, reached: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	return h.reached, func() { h.once.Do(func() { close(h.release) }) }
}

func (s *imageServer) releaseHold() {
	s.mu.Lock()
	h := s.hold
	s.mu.Unlock()
	if h != nil {
		h.once.Do(func() { close(h.release) })
	}
}

// holdingWriter passes a response through until the hold's byte count,
// then blocks until the hold is released (or the client goes away).
type holdingWriter struct {
	http.ResponseWriter
	hold    *downloadHold
	ctx     context.Context
	written int64
	held    bool
}

func (w *holdingWriter) Write(p []byte) (int, error) {
	if !w.held && w.written+int64(len(p)) >= w.hold.at {
		n := int(w.hold.at - w.written)
		if n > 0 {
			if m, err := w.ResponseWriter.Write(p[:n]); err != nil {
				return m, err
			}
		}
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		w.held = true
		close(w.hold.reached)
		select {
		case <-w.hold.release:
		case <-w.ctx.Done():
			return n, errors.New("image download: client went away while held")
		}
		m, err := w.ResponseWriter.Write(p[n:])
		w.written += int64(n + m)
		return n + m, err
	}
	m, err := w.ResponseWriter.Write(p)
	w.written += int64(m)
	return m, err
}
