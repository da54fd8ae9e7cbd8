package imagecache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/qcow2"
)

// Resolver says which image a node deploys (from its instance_info), with
// the origin credentials the process holds, never the request's.
type Resolver func(ctx context.Context, nodeUUID string) (Source, error)

// Server serves GET {prefix}{node}/image: the image the node deploys, from
// the cache, with range requests. A node keeps a reference on the image it
// was last served until it has been idle for Lease or asks for another, so
// that an agent resuming a download after a pause finds its image still
// there: "in use by a running deploy" without the boot service having to
// follow deploys.
type Server struct {
	Cache   *Cache
	Resolve Resolver
	Lease   time.Duration // default 15 minutes
	Log     *slog.Logger

	// ResolveBootFile says which Glance image a node's kernel or ramdisk
	// (PartKernel, PartRamdisk) is, for GET {prefix}{node}/{part}; nil: none
	// is served.
	ResolveBootFile func(ctx context.Context, nodeUUID, part string) (Source, error)

	mu     sync.Mutex
	leases map[string]*lease
	keys   map[string]string // node → key of the image it last asked for
}

// ServeHTTP routes GET /cache/{uuid}/image (Image), GET
// /cache/{uuid}/checksum (Checksum) and GET /cache/{uuid}/progress
// (Progress).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/cache/")
	node, what, _ := strings.Cut(rest, "/")
	id, err := uuid.Parse(node)
	if err != nil || r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.NotFound(w, r)
		return
	}
	switch what {
	case "image":
		s.Image(w, r, id.String())
	case "progress":
		s.Progress(w, r, id.String())
	case "checksum":
		s.Checksum(w, r, id.String())
	case PartKernel, PartRamdisk:
		s.BootFile(w, r, id.String(), what)
	default:
		http.NotFound(w, r)
	}
}

// ProgressReport is the answer of GET /cache/{uuid}/progress.
type ProgressReport struct {
	Downloading bool  `json:"downloading"`
	Downloaded  int64 `json:"downloaded"`
	Total       int64 `json:"total"` // 0 if unknown
}

// Progress reports the cache's download of the image the node asked for,
// for the worker to show while the agent waits for its first byte.
func (s *Server) Progress(w http.ResponseWriter, r *http.Request, nodeUUID string) {
	s.mu.Lock()
	key, ok := s.keys[nodeUUID]
	s.mu.Unlock()
	var rep ProgressReport
	if ok {
		if p, inFlight := s.Cache.Progress(key); inFlight {
			rep = ProgressReport{Downloading: true, Downloaded: p.Downloaded, Total: p.Total}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(rep)
}

type lease struct {
	h     *Handle
	key   string
	timer *time.Timer
}

// Image handles one request; nodeUUID comes from the route. The first
// request for an image not yet cached (a GET from its start) is served as
// the cache downloads it (Follow); the others from the cached file.
func (s *Server) Image(w http.ResponseWriter, r *http.Request, nodeUUID string) {
	src, ok := s.resolveImage(w, r, nodeUUID)
	if !ok {
		return
	}
	if r.Method == http.MethodGet && r.Header.Get("Range") == "" {
		fl, err := s.Cache.Follow(r.Context(), src)
		if err != nil {
			s.failAcquire(w, nodeUUID, err)
			return
		}
		if fl != nil {
			s.follow(w, r, nodeUUID, src, fl)
			return
		}
	}
	h, ok := s.acquire(w, r, nodeUUID, nodeUUID, src)
	if !ok {
		return
	}
	defer h.Release()
	s.serveFile(w, r, nodeUUID, h)
}

// follow answers with the image as the cache downloads it. A download that
// fails midway (its checksum, the origin) aborts the answer, so that the
// client sees a broken transfer, never a complete one; it resumes with a
// Range request, which waits for the cache's verdict.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, nodeUUID string, src Source, fl *Follower) {
	defer fl.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if n := fl.Size(); n > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, fl); err != nil {
		if s.Log != nil {
			s.Log.Warn("image cache: serving an image while it downloads failed", "node", nodeUUID, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	// Cached and verified: the node holds its lease on it, as on any
	// image it is served.
	if h, err := s.Cache.Acquire(r.Context(), src); err == nil {
		s.hold(nodeUUID, h.Key())
		h.Release()
	}
}

// BootFile handles GET {prefix}{node}/{part}: a partition image's kernel or
// ramdisk that is a Glance image, from the cache, held for the node as its
// image is (under a lease of its own).
func (s *Server) BootFile(w http.ResponseWriter, r *http.Request, nodeUUID, part string) {
	if s.ResolveBootFile == nil {
		http.NotFound(w, r)
		return
	}
	src, err := s.ResolveBootFile(r.Context(), nodeUUID, part)
	if err != nil {
		code := http.StatusNotFound
		if errors.Is(err, glance.ErrUnavailable) {
			code = http.StatusBadGateway
		}
		s.fail(w, nodeUUID, err, code)
		return
	}
	h, ok := s.acquire(w, r, nodeUUID, nodeUUID+"/"+part, src)
	if !ok {
		return
	}
	defer h.Release()
	s.serveFile(w, r, nodeUUID, h)
}

// serveFile answers with the cached file h holds.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, nodeUUID string, h *Handle) {
	f, err := os.Open(h.Path())
	if err != nil {
		s.fail(w, nodeUUID, err, http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.fail(w, nodeUUID, err, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// Checksum answers with the checksum of the image Image serves the node,
// as a checksums file ("<hex>  image"), once the image is in the cache:
// the agent reads it before the image (instance_info/image_checksum as a
// URL), and retries while the cache downloads and converts.
func (s *Server) Checksum(w http.ResponseWriter, r *http.Request, nodeUUID string) {
	h, ok := s.acquireImage(w, r, nodeUUID)
	if !ok {
		return
	}
	defer h.Release()
	_, sum := h.Checksum()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintf(w, "%s  image\n", sum)
}

// acquireImage resolves the node's image and takes a handle on it, the
// node holding a lease on what it is served; it answers the request itself
// when it fails.
func (s *Server) acquireImage(w http.ResponseWriter, r *http.Request, nodeUUID string) (*Handle, bool) {
	src, ok := s.resolveImage(w, r, nodeUUID)
	if !ok {
		return nil, false
	}
	return s.acquire(w, r, nodeUUID, nodeUUID, src)
}

// resolveImage finds what the node's image is, remembered for Progress;
// it answers the request itself when it fails.
func (s *Server) resolveImage(w http.ResponseWriter, r *http.Request, nodeUUID string) (Source, bool) {
	src, err := s.Resolve(r.Context(), nodeUUID)
	if err != nil {
		code := http.StatusNotFound
		if errors.Is(err, glance.ErrUnavailable) {
			code = http.StatusBadGateway // the agent retries
		}
		s.fail(w, nodeUUID, err, code)
		return Source{}, false
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string]string{}
	}
	s.keys[nodeUUID] = src.Key
	s.mu.Unlock()
	return src, true
}

// acquire takes a handle on src's cached file; holder names the lease that
// keeps it for the node. It answers the request itself when it fails.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, nodeUUID, holder string, src Source) (*Handle, bool) {
	h, err := s.Cache.Acquire(r.Context(), src)
	if err != nil {
		s.failAcquire(w, nodeUUID, err)
		return nil, false
	}
	// The lease is on the entry served: with ForceRaw, the raw one.
	s.hold(holder, h.Key())
	return h, true
}

// failAcquire answers a failure to get the image into the cache. The
// agent retries a 5xx (the origin may come back, a lease may end) and
// gives up on a 4xx: data that does not match its checksum will not match
// it next time either.
func (s *Server) failAcquire(w http.ResponseWriter, nodeUUID string, err error) {
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, ErrFull):
		code = http.StatusInsufficientStorage
	case errors.Is(err, ErrChecksum), errors.Is(err, ErrUntrusted), errors.Is(err, ErrFormat),
		errors.Is(err, qcow2.ErrCorrupt), errors.Is(err, qcow2.ErrUnsupported), errors.Is(err, qcow2.ErrReorderLimit):
		// None changes by retrying: the agent gives up at once
		// with the reason (the operator's fix is named in it).
		code = http.StatusUnprocessableEntity
	}
	s.fail(w, nodeUUID, err, code)
}

func (s *Server) fail(w http.ResponseWriter, node string, err error, code int) {
	if s.Log != nil {
		s.Log.Warn("image cache: cannot serve the image of a node", "node", node, "err", err)
	}
	http.Error(w, err.Error(), code)
}

// hold gives the node a reference on key (released after Lease idle).
func (s *Server) hold(node, key string) {
	lt := s.Lease
	if lt <= 0 {
		lt = 15 * time.Minute
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = map[string]*lease{}
	}
	if l := s.leases[node]; l != nil {
		if l.key == key {
			l.timer.Reset(lt)
			return
		}
		l.timer.Stop()
		l.h.Release()
		delete(s.leases, node)
	}
	h, err := s.Cache.pin(key)
	if err != nil {
		return
	}
	l := &lease{h: h, key: key}
	l.timer = time.AfterFunc(lt, func() { s.release(node, l) })
	s.leases[node] = l
}

func (s *Server) release(node string, l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[node] == l {
		delete(s.leases, node)
		l.h.Release()
	}
}

// Release drops a node's references at once (its deploy ended): its
// image's and its boot files'.
func (s *Server) Release(node string) {
	for _, holder := range []string{node, node + "/" + PartKernel, node + "/" + PartRamdisk} {
		s.mu.Lock()
		l := s.leases[holder]
		s.mu.Unlock()
		if l != nil {
			l.timer.Stop()
			s.release(holder, l)
		}
	}
}
