package main

import (
	"time"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/store"
)

// bootFlags are the PXE services' settings.
type bootFlags struct {
	listen, publicURL, imagesDir, isoDir, tftpListen, tftpRoot *string
	dhcpInterface, dhcpMode, dhcpAddr, dhcpPool, dhcpRouter    *string
	dhcpListen, loadersDir                                     *string
	dhcp6                                                      dhcpv6Flags
	kickstartAnyClient                                         *bool
	limits                                                     httpLimits
	tls                                                        httpTLS
	cache                                                      cacheFlags
	glance                                                     glanceFlags // set by the command (ironflow dev shares the worker's)
	metricsListen                                              *string     // set by ironflow pxe (ironflow dev serves the API's)
}

func addBootFlags(s *settings) bootFlags {
	return bootFlags{
		listen:        s.String("boot-listen", defaultBootListen, "HTTP boot service listen address"),
		publicURL:     s.String("boot-public-url", "", "the HTTP boot service as machines and BMCs reach it (default http://<boot-listen>)"),
		imagesDir:     s.String("images-dir", "", "served under /images/: agent.kernel, agent.initramfs, instance images (default <data-dir>/images)"),
		isoDir:        s.String("iso-dir", "", "per-node virtual media ISOs (default <data-dir>/iso)"),
		tftpListen:    s.String("tftp-listen", "", "TFTP listen address for iPXE binaries, e.g. 10.0.0.1:69 (empty: off)"),
		tftpRoot:      s.String("tftp-root", "", "TFTP root (default: Debian's /usr/lib/ipxe)"),
		loadersDir:    s.String("boot-loaders-dir", pxe.DefaultLoadersDir, "UEFI loaders (*.efi) served under /loaders/ for UEFI HTTP boot (boot interface http-ipxe)"),
		dhcpInterface: s.String("dhcp-interface", "", "interface to serve DHCP on (empty: off unless --dhcp-listen is set)"),
		dhcpListen:    s.String("dhcp-listen", "", "UDP address ip:port to serve DHCP on, e.g. 0.0.0.0:67 with --dhcp-interface, or a relay-facing address (empty: port 67 on --dhcp-interface)"),
		dhcpMode:      s.String("dhcp-mode", pxe.DHCPModeReservation, "reservation (authoritative for prepared nodes) or proxy (boot options only)"),
		dhcpAddr:      s.String("dhcp-server-address", "", "ironflow's IPv4 address on the DHCP segment"),
		dhcpPool:      s.String("dhcp-pool", "", "reservation pool as CIDR,first,last e.g. 10.0.0.0/24,10.0.0.100,10.0.0.200"),
		dhcpRouter:    s.String("dhcp-router", "", "router option for the pool"),
		dhcp6:         addDHCPv6Flags(s),
		kickstartAnyClient: s.Bool("boot-kickstart-any-client", false,
			"serve a node's kickstart to any client when the node has no lease from ironflow's DHCP (a boot service off the nodes' segment; docs/security.md)"),
		// Machines download kernels, ramdisks and images: a long write timeout.
		limits: addHTTPLimits(s, "boot", time.Minute, 30*time.Minute, 2*time.Minute),
		tls:    addHTTPTLS(s, "boot-", "HTTP boot service"),
		cache:  addCacheFlags(s),
	}
}

// isoService builds agent ISOs into the ISO directory the HTTP boot service
// serves, from the agent kernel and initramfs in the images directory.
type isoService struct {
	isos      pxe.AgentISOs
	imagesDir string
	baseURL   string
}

func (v isoService) BuildAgentISO(ctx context.Context, req activities.AgentISO) (string, error) {
	_, err := v.isos.Build(ctx, filepath.Join(v.imagesDir, "agent.kernel"), filepath.Join(v.imagesDir, "agent.initramfs"), pxe.ISOParams{
		NodeUUID: req.NodeUUID, APIURL: req.APIURL, AgentToken: req.Token, KernelParams: req.KernelParams,
		SecureBoot: req.SecureBoot, NetworkData: req.NetworkData,
	})
	if err != nil {
		return "", err
	}
	name, err := v.isos.URLName(req.NodeUUID)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(v.baseURL, "/") + "/iso/" + name, nil
}

func (v isoService) RemoveAgentISO(nodeUUID string) error { return v.isos.Remove(nodeUUID) }

// startBoot runs the HTTP boot service, and TFTP and DHCP when configured.
// It returns the HTTP address, a channel that reports the first service to
// stop, and the virtual-media ISO service for the worker.
func startBoot(ctx context.Context, f bootFlags, dataDir string, st *store.Store, log *slog.Logger) (string, <-chan error, activities.VirtualMedia, error) {
	if *f.imagesDir == "" {
		*f.imagesDir = filepath.Join(dataDir, "images")
	}
	if *f.isoDir == "" {
		*f.isoDir = filepath.Join(dataDir, "iso")
	}
	for _, d := range []string{*f.imagesDir, *f.isoDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	backend := bootStore{st: st}
	blog := log.With("component", "pxe")
	cache, err := imageCacheHandler(f.cache, f.glance, dataDir, st, blog.With("service", "image cache"))
	if err != nil {
		return "", nil, nil, err
	}
	h, err := pxe.NewHTTPHandler(pxe.HTTPConfig{Addr: *f.listen, ImagesDir: *f.imagesDir, ISODir: *f.isoDir, Cache: cache,
		KickstartAnyClient: *f.kickstartAnyClient, LoadersDir: *f.loadersDir}, backend, blog)
	if err != nil {
		return "", nil, nil, err
	}
	limits := f.limits
	limits.tls = f.tls
	limits.tls.firmware = true // UEFI HTTPS boot fetches loaders here
	addr, done, err := serveHTTP(ctx, "boot http", *f.listen, h, limits, log)
	if err != nil {
		return "", nil, nil, err
	}
	base := *f.publicURL
	if base == "" {
		base = f.tls.scheme() + "://" + addr
	}
	errs := make(chan error, 5)
	go func() { errs <- <-done }()

	if *f.tftpListen != "" {
		// arm64 machines' loaders sit beside their agent in the images
		// directory (make ramdisk-arm64; docs/bmcs-and-boot.md, "arm64").
		t, err := pxe.NewTFTPServer(pxe.TFTPConfig{Addr: *f.tftpListen, Root: *f.tftpRoot,
			ARM64NetGrub: filepath.Join(*f.imagesDir, pxe.DefaultARM64BootFile), ARM64Shim: filepath.Join(*f.imagesDir, pxe.DefaultARM64SecureBootFile)}, blog)
		if err != nil {
			return "", nil, nil, err
		}
		t.ServeBootConfigs(backend) // the secure-boot chain (pxe/grubnet.go)
		go func() { errs <- t.ListenAndServe(ctx) }()
		log.Info("tftp listening", "address", *f.tftpListen)
	}
	if *f.dhcpInterface != "" || *f.dhcpListen != "" {
		cfg, err := f.dhcpConfig(base)
		if err != nil {
			return "", nil, nil, err
		}
		d, err := pxe.NewDHCPServer(cfg, backend, backend, blog)
		if err != nil {
			return "", nil, nil, err
		}
		go func() { errs <- d.Serve(ctx) }()
		log.Info("dhcp serving", "interface", *f.dhcpInterface, "listen", *f.dhcpListen, "mode", cfg.Mode)
	}
	if err := f.dhcp6.start(ctx, base, backend, blog, errs); err != nil {
		return "", nil, nil, err
	}
	vm := isoService{isos: pxe.AgentISOs{Dir: *f.isoDir}, imagesDir: *f.imagesDir, baseURL: base}
	return addr, errs, vm, nil
}

func (f bootFlags) dhcpConfig(httpBase string) (pxe.DHCPConfig, error) {
	addr, err := netip.ParseAddr(*f.dhcpAddr)
	if err != nil {
		return pxe.DHCPConfig{}, fmt.Errorf("--dhcp-server-address %q: %w", *f.dhcpAddr, err)
	}
	cfg := pxe.DHCPConfig{Mode: *f.dhcpMode, Interface: *f.dhcpInterface, Addr: addr, HTTPBaseURL: httpBase}
	if *f.dhcpListen != "" {
		if cfg.Listen, err = netip.ParseAddrPort(*f.dhcpListen); err != nil {
			return cfg, fmt.Errorf("--dhcp-listen %q: want ip:port: %w", *f.dhcpListen, err)
		}
	}
	if *f.dhcpPool != "" {
		parts := strings.Split(*f.dhcpPool, ",")
		if len(parts) != 3 {
			return cfg, errors.New("--dhcp-pool wants CIDR,first,last")
		}
		var pool pxe.DHCPPool
		if pool.Subnet, err = netip.ParsePrefix(parts[0]); err != nil {
			return cfg, fmt.Errorf("--dhcp-pool subnet: %w", err)
		}
		if pool.First, err = netip.ParseAddr(parts[1]); err != nil {
			return cfg, fmt.Errorf("--dhcp-pool first: %w", err)
		}
		if pool.Last, err = netip.ParseAddr(parts[2]); err != nil {
			return cfg, fmt.Errorf("--dhcp-pool last: %w", err)
		}
		if *f.dhcpRouter != "" {
			if pool.Router, err = netip.ParseAddr(*f.dhcpRouter); err != nil {
				return cfg, fmt.Errorf("--dhcp-router: %w", err)
			}
		}
		cfg.Pools = []pxe.DHCPPool{pool}
	}
	return cfg, nil
}

// pxeSettings builds ironflow pxe's flags: the boot services', the
// directory the defaults hang from and the database.
func pxeSettings() (s *settings, f bootFlags, dataDir, dbURL *string) {
	s = newSettings("pxe")
	f = addBootFlags(s)
	f.glance = addGlanceFlags(s)
	f.metricsListen = addMetricsListen(s, defaultPXEMetricsListen)
	dataDir = s.String("data-dir", ".data", "default parent of the images and ISO directories")
	dbURL = s.String("database-url", "", "PostgreSQL URL", "DATABASE_URL")
	return s, f, dataDir, dbURL
}

func runPXECommand(ctx context.Context, args []string) error {
	s, f, dataDir, dbURL := pxeSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	log := logger()
	st, err := openStore(ctx, *dbURL, false)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := serveMetrics(ctx, *f.metricsListen, nil, log); err != nil {
		return err
	}
	_, errs, _, err := startBoot(ctx, f, *dataDir, st, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}
