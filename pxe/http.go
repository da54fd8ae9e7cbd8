package pxe

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Named defaults of the HTTP boot service.
const (
	DefaultHTTPAddr = ":8080"
	// DefaultHTTPReadHeaderTimeout bounds a slow client's headers; bodies
	// are large images, so there is no overall write timeout.
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
)

// HTTPConfig configures the HTTP boot service.
type HTTPConfig struct {
	Addr      string // listen address, DefaultHTTPAddr if empty
	ImagesDir string // served under /images/ (agent kernel, initramfs, images); off if empty
	ISODir    string // per-node virtual media ISOs <ISODir>/<uuid>.iso under /iso/; off if empty
	// Cache serves GET /cache/{uuid}/image, the node's instance image from
	// the image cache, and /cache/{uuid}/progress (package imagecache); off
	// if nil.
	Cache http.Handler `json:"-"`
	// KickstartAnyClient serves the kickstart of a node that holds no
	// lease from ironflow's DHCP to any client, as before the neighbour
	// check: for a boot service that is not on the nodes' segment (behind
	// a router or a reverse proxy), where it cannot see their link-layer
	// addresses (docs/security.md).
	KickstartAnyClient bool `json:"kickstart_any_client,omitempty"`
	// Neighbors resolves a client's address to its link-layer address;
	// the host's neighbour table (ARP, NDP) if nil.
	Neighbors func(netip.Addr) (net.HardwareAddr, bool) `json:"-"`
	// LoadersDir holds the UEFI loaders (*.efi) served under /loaders/ for
	// UEFI HTTP boot (httpboot.go); DefaultLoadersDir if empty.
	LoadersDir string `json:"loaders_dir,omitempty"`
}

type httpBoot struct {
	backend   NodeBackend
	images    *os.Root
	isos      *os.Root
	log       *slog.Logger
	anyClient bool
	neighbors func(netip.Addr) (net.HardwareAddr, bool)
	loaders   *os.Root // nil when the loaders directory is absent
}

// NewHTTPHandler returns the boot service's routes:
//
//	GET /boot/{uuid}/boot.ipxe  the node's iPXE script (404 without a boot config)
//	GET /boot/{uuid}/ks.cfg     the node's kickstart (404 without a boot config or kickstart)
//	GET /images/{path...}        static files, range requests included
//	GET /iso/{uuid}-{key}.iso    the node's virtual media ISO (404 without a boot config or with another key)
//	GET /cache/{uuid}/image      the node's instance image through the image cache (with HTTPConfig.Cache)
//	GET /cache/{uuid}/progress   that cache's download in flight, as JSON
//	GET /loaders/{file}          a UEFI loader for UEFI HTTP boot (httpboot.go)
//	GET /health                  200 "ok"
func NewHTTPHandler(cfg HTTPConfig, backend NodeBackend, log *slog.Logger) (http.Handler, error) {
	if backend == nil {
		return nil, errors.New("http boot: no boot config backend")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &httpBoot{backend: backend, log: log.With("service", "http"), anyClient: cfg.KickstartAnyClient, neighbors: cfg.Neighbors}
	if h.neighbors == nil {
		h.neighbors = kernelNeighbors
	}
	var err error
	// os.Root keeps every lookup, symlinks included, inside its directory.
	if cfg.ImagesDir != "" {
		if h.images, err = os.OpenRoot(cfg.ImagesDir); err != nil {
			return nil, fmt.Errorf("http boot: open images dir: %w", err)
		}
	}
	if cfg.ISODir != "" {
		if h.isos, err = os.OpenRoot(cfg.ISODir); err != nil {
			return nil, fmt.Errorf("http boot: open ISO dir: %w", err)
		}
	}
	if err := h.openLoaders(cfg); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boot/{uuid}/boot.ipxe", h.script)
	mux.HandleFunc("GET /loaders/{file}", h.loader)
	mux.HandleFunc("GET /boot/{uuid}/ks.cfg", h.kickstart)
	mux.HandleFunc("GET /images/{path...}", h.image)
	mux.HandleFunc("GET /iso/{file}", h.iso)
	if cfg.Cache != nil {
		mux.Handle("GET /cache/", cfg.Cache)
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	return h.logRequests(mux), nil
}

// bootConfig returns the node's boot config, or writes the error reply.
func (h *httpBoot) bootConfig(w http.ResponseWriter, r *http.Request, raw string) (*BootConfig, bool) {
	id, err := uuid.Parse(raw)
	if err != nil {
		http.NotFound(w, r)
		return nil, false
	}
	bc, err := h.backend.BootConfigByNode(r.Context(), id.String())
	switch {
	case errors.Is(err, ErrNoBootConfig):
		http.NotFound(w, r)
		return nil, false
	case err != nil:
		h.log.Error("read boot config", "node", id.String(), "error", err)
		http.Error(w, "boot config unavailable", http.StatusServiceUnavailable)
		return nil, false
	}
	return bc, true
}

func (h *httpBoot) script(w http.ResponseWriter, r *http.Request) {
	bc, ok := h.bootConfig(w, r, r.PathValue("uuid"))
	if !ok {
		return
	}
	s, err := RenderIPXEScript(*bc)
	if err != nil {
		h.log.Error("render iPXE script", "node", bc.NodeUUID, "error", err)
		http.Error(w, "boot config cannot be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(s))
}

// kickstart serves the kickstart stored with the boot config. It carries
// the agent token, so it is never cached, and a node whose deploy is over
// (boot config removed) gets 404.
func (h *httpBoot) kickstart(w http.ResponseWriter, r *http.Request) {
	bc, ok := h.bootConfig(w, r, r.PathValue("uuid"))
	if !ok {
		return
	}
	if bc.Kickstart == "" {
		http.NotFound(w, r)
		return
	}
	if !h.fromNode(w, r, bc) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(bc.Kickstart))
}

// LeaseAddrs is implemented by a NodeBackend whose nodes get their
// addresses from ironflow's DHCP: the unexpired addresses leased to macs.
type LeaseAddrs interface {
	LeasedAddrs(ctx context.Context, macs []string) ([]netip.Addr, error)
}

// fromNode reports whether r may read the node's kickstart (it holds the
// agent token, repository credentials and the root password hash), and
// writes the refusal itself. When the node holds leases from ironflow's
// DHCP (reservation mode), only a client at one of its leased addresses
// may. Otherwise (proxy DHCP, another DHCP server) the client's address
// must resolve, in the boot host's neighbour table, to one of the node's
// MACs: the machine that asks is the node's own network card, as far as
// the segment tells (docs/security.md, "Secrets the boot services hand
// out").
func (h *httpBoot) fromNode(w http.ResponseWriter, r *http.Request, bc *BootConfig) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	client := ap.Addr().Unmap()
	if la, ok := h.backend.(LeaseAddrs); ok {
		addrs, lerr := la.LeasedAddrs(r.Context(), bc.MACs)
		if lerr != nil {
			h.log.Error("read leases", "node", bc.NodeUUID, "error", lerr)
			http.Error(w, "boot config unavailable", http.StatusServiceUnavailable)
			return false
		}
		if len(addrs) > 0 {
			if err == nil && slices.Contains(addrs, client) {
				return true
			}
			h.log.Warn("kickstart refused: the client is not the node's leased address", "node", bc.NodeUUID, "remote", r.RemoteAddr)
			http.NotFound(w, r)
			return false
		}
	}
	if h.anyClient {
		return true
	}
	hw, known := net.HardwareAddr(nil), false
	if err == nil {
		hw, known = h.neighbors(client)
	}
	if known && slices.ContainsFunc(bc.MACs, func(m string) bool {
		p, perr := net.ParseMAC(m)
		return perr == nil && bytes.Equal(p, hw)
	}) {
		return true
	}
	why := "the client's address is not in the boot host's neighbour table (not on the nodes' segment)"
	if known {
		why = "the client's link-layer address " + hw.String() + " is not one of the node's ports"
	}
	h.log.Warn("kickstart refused: "+why, "node", bc.NodeUUID, "remote", r.RemoteAddr)
	http.NotFound(w, r)
	return false
}

func (h *httpBoot) image(w http.ResponseWriter, r *http.Request) {
	if h.images == nil {
		http.NotFound(w, r)
		return
	}
	serveFromRoot(w, r, h.images, r.PathValue("path"))
}

func (h *httpBoot) iso(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	base, found := strings.CutSuffix(name, ".iso")
	// "<uuid>-<key>.iso": the ISO holds the agent token, so it is served
	// only to whoever knows the key of its current build (AgentISOs.URLName).
	if h.isos == nil || !found || len(base) < 38 || base[36] != '-' {
		http.NotFound(w, r)
		return
	}
	bc, ok := h.bootConfig(w, r, base[:36])
	if !ok {
		return
	}
	key, err := h.isos.ReadFile(bc.NodeUUID + ".iso" + isoKeySuffix)
	if err != nil || subtle.ConstantTimeCompare(key, []byte(base[37:])) != 1 {
		http.NotFound(w, r)
		return
	}
	serveFromRoot(w, r, h.isos, bc.NodeUUID+".iso")
}

// serveFromRoot serves one regular file under root with http.ServeContent,
// which answers Range and If-Modified-Since requests. Directories are not
// listed.
func serveFromRoot(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
	if name == "" || !fs.ValidPath(name) || strings.Contains(name, `\`) {
		http.NotFound(w, r)
		return
	}
	f, err := root.Open(path.Clean(name))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// ReadFrom lets http.ServeContent hand whole files to the connection
// (sendfile) through the logging wrapper instead of copying them in user
// space: the kernel and initramfs are the bulk of every boot.
func (s *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{s.ResponseWriter}, r)
	}
	s.bytes += n
	return n, err
}

// Flush passes flushes through the logging wrapper.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logRequests logs each request without its query string, which may carry
// tokens.
func (h *httpBoot) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		observeBootHTTP(r.URL.Path, sw.status, sw.bytes)
		h.log.Info("http request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "bytes", sw.bytes, "peer", r.RemoteAddr, "duration", time.Since(start))
	})
}

// NewHTTPServer wraps handler in a server with ironflow's timeouts.
func NewHTTPServer(addr string, handler http.Handler) *http.Server {
	if addr == "" {
		addr = DefaultHTTPAddr
	}
	return &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: DefaultHTTPReadHeaderTimeout}
}
