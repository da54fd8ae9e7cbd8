package pxe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/pin/tftp/v3"

	"github.com/ironflow/ironflow/metrics"
)

// DefaultTFTPRoots are tried in order when TFTPConfig.Root is empty: Debian's
// ipxe package puts undionly.kpxe and ipxe.efi in /usr/lib/ipxe.
var DefaultTFTPRoots = []string{"/usr/lib/ipxe"}

// Named defaults of the TFTP service.
const (
	DefaultTFTPAddr    = ":69"
	DefaultTFTPTimeout = 5 * time.Second
	DefaultTFTPRetries = 5
)

// TFTPConfig configures the read-only TFTP service that hands PXE ROMs an
// iPXE binary.
type TFTPConfig struct {
	Addr    string // listen address, DefaultTFTPAddr if empty
	Root    string // directory served; first existing DefaultTFTPRoots if empty
	Timeout time.Duration
	Retries int
	// Shim and SignedNetGrub are the secure-boot chain's loaders, served
	// as shimx64.efi and grubx64.efi (grubnet.go); DefaultShim and
	// DefaultSignedNetGrub if empty.
	Shim          string
	SignedNetGrub string
	// ARM64NetGrub and ARM64Shim are arm64 UEFI machines' loaders, served
	// as grubaa64.efi and shimaa64.efi (Debian's grubnetaa64.efi.signed and
	// shimaa64.efi.signed; make ramdisk-arm64 puts them in the images
	// directory); none when empty or missing.
	ARM64NetGrub, ARM64Shim string
}

// TFTPServer serves files under one root, read-only.
type TFTPServer struct {
	cfg  TFTPConfig
	root *os.Root
	srv  *tftp.Server
	log  *slog.Logger
	// pinned maps the iPXE loaders' names to files resolved once at start.
	pinned map[string]string
	// grub serves the secure-boot chain's per-node files (grubnet.go);
	// nil until ServeBootConfigs.
	grub *grubNet
}

// PinnedTFTPFiles are served even when they are symlinks leaving the root:
// Debian's ipxe package links /usr/lib/ipxe/ipxe.efi to /boot. They are
// resolved once at start from the operator's configuration, never from a
// client's request.
var PinnedTFTPFiles = []string{DefaultBIOSBootFile, DefaultUEFIBootFile, "snponly.efi"}

func (s *TFTPServer) pinLoaders() {
	shim, grub := s.cfg.Shim, s.cfg.SignedNetGrub
	if shim == "" {
		shim = DefaultShim
	}
	if grub == "" {
		grub = DefaultSignedNetGrub
	}
	for name, p := range map[string]string{DefaultSecureBootFile: shim, grubNetName: grub, DefaultARM64BootFile: s.cfg.ARM64NetGrub, DefaultARM64SecureBootFile: s.cfg.ARM64Shim} {
		if p == "" {
			continue
		}
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			if st, err := os.Stat(resolved); err == nil && st.Mode().IsRegular() {
				s.pinned[name] = resolved
			}
		}
	}
	for _, name := range PinnedTFTPFiles {
		resolved, err := filepath.EvalSymlinks(filepath.Join(s.cfg.Root, name))
		if err != nil {
			continue
		}
		if st, err := os.Stat(resolved); err == nil && st.Mode().IsRegular() {
			s.pinned[name] = resolved
		}
	}
}

// NewTFTPServer opens the root directory; Serve or ListenAndServe start it.
func NewTFTPServer(cfg TFTPConfig, log *slog.Logger) (*TFTPServer, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultTFTPAddr
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTFTPTimeout
	}
	if cfg.Retries == 0 {
		cfg.Retries = DefaultTFTPRetries
	}
	if cfg.Root == "" {
		for _, d := range DefaultTFTPRoots {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				cfg.Root = d
				break
			}
		}
		if cfg.Root == "" {
			return nil, fmt.Errorf("tftp: no root directory configured and none of %v exists (install Debian's ipxe package)", DefaultTFTPRoots)
		}
	}
	// os.Root refuses any path, symlink included, that resolves outside it.
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("tftp: open root %s: %w", cfg.Root, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &TFTPServer{cfg: cfg, root: root, log: log.With("service", "tftp"), pinned: map[string]string{}}
	s.pinLoaders()
	if s.pinned[DefaultSecureBootFile] == "" || s.pinned[grubNetName] == "" {
		s.log.Warn("secure boot over PXE unavailable: shim or signed GRUB missing (install shim-signed and grub-efi-amd64-signed)",
			"shim", cfg.Shim, "signed_net_grub", cfg.SignedNetGrub)
	}
	// A nil write handler makes the library refuse every write request.
	s.srv = tftp.NewServer(s.read, nil)
	s.srv.SetTimeout(cfg.Timeout)
	s.srv.SetRetries(cfg.Retries)
	return s, nil
}

// errTFTPPath is what a client asking for a path outside the root gets.
var errTFTPPath = errors.New("invalid file name")

// cleanTFTPName turns a requested file name into a path relative to the
// root, refusing absolute names and any ".." element.
func cleanTFTPName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) {
		return "", errTFTPPath
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", errTFTPPath
		}
	}
	return path.Clean(name), nil
}

// read is the tftp read handler: one regular file under the root, its size
// announced for the tsize option (RFC 2349).
func (s *TFTPServer) read(name string, rf io.ReaderFrom) error {
	err := s.readFile(name, rf)
	observeTFTP(err)
	return err
}

// readFile is read without the measure.
func (s *TFTPServer) readFile(name string, rf io.ReaderFrom) error {
	var peer string
	if info, ok := rf.(tftp.OutgoingTransfer); ok {
		addr := info.RemoteAddr()
		peer = addr.String()
	}
	if s.grub != nil {
		// GRUB asks for absolute paths (/grub/grub.cfg); the chain's
		// names are matched without the leading slash, nothing else is.
		r, size, ok, err := s.grub.open(context.Background(), strings.TrimPrefix(name, "/"))
		if ok {
			if err != nil {
				s.log.Warn("TFTP file not served", "file", name, "peer", peer, "error", err)
				return err
			}
			defer r.Close()
			if ot, isOut := rf.(tftp.OutgoingTransfer); isOut && size >= 0 {
				ot.SetSize(size)
			}
			start := time.Now()
			n, err := rf.ReadFrom(r)
			metrics.TFTPSentBytes.Add(float64(n))
			if err != nil {
				s.log.Warn("TFTP transfer failed", "file", name, "peer", peer, "bytes", n, "error", err)
				return err
			}
			s.log.Info("TFTP transfer done", "file", strings.TrimPrefix(name, "/"), "peer", peer, "bytes", n, "duration", time.Since(start))
			return nil
		}
	}
	rel, err := cleanTFTPName(name)
	if err != nil {
		s.log.Warn("refused TFTP path", "file", name, "peer", peer)
		return err
	}
	var f *os.File
	if p, ok := s.pinned[rel]; ok {
		f, err = os.Open(p)
	} else {
		f, err = s.root.Open(rel)
	}
	if err != nil {
		s.log.Warn("TFTP file not served", "file", name, "peer", peer, "error", err)
		if errors.Is(err, fs.ErrNotExist) {
			return errors.New("file not found")
		}
		return errTFTPPath
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return errors.New("file not found")
	}
	if ot, ok := rf.(tftp.OutgoingTransfer); ok {
		ot.SetSize(st.Size())
	}
	start := time.Now()
	n, err := rf.ReadFrom(f)
	metrics.TFTPSentBytes.Add(float64(n))
	if err != nil {
		s.log.Warn("TFTP transfer failed", "file", rel, "peer", peer, "bytes", n, "error", err)
		return err
	}
	s.log.Info("TFTP transfer done", "file", rel, "peer", peer, "bytes", n, "duration", time.Since(start))
	return nil
}

// Serve answers TFTP on conn until ctx ends.
func (s *TFTPServer) Serve(ctx context.Context, conn net.PacketConn) error {
	stop := context.AfterFunc(ctx, s.srv.Shutdown)
	defer stop()
	s.log.Info("TFTP serving", "addr", conn.LocalAddr().String(), "root", s.cfg.Root)
	if err := s.srv.Serve(conn); err != nil && ctx.Err() == nil {
		return fmt.Errorf("tftp: serve: %w", err)
	}
	return nil
}

// ListenAndServe listens on cfg.Addr and serves until ctx ends.
func (s *TFTPServer) ListenAndServe(ctx context.Context) error {
	conn, err := net.ListenPacket("udp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("tftp: listen on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, conn)
}

// Close releases the root directory.
func (s *TFTPServer) Close() error { return s.root.Close() }
