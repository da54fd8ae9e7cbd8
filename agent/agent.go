package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Named defaults; each can be overridden in Config (and on the kernel
// command line for the real agent).
const (
	// DefaultListenAddr is IPA's command API port.
	DefaultListenAddr = ":9999"
	// DefaultAPIVersion is the Ironic API microversion the agent speaks:
	// 1.68 brings agent_verify_ca and 1.72 agent_status; 1.78 is what the
	// baremetal CLI sends.
	DefaultAPIVersion = "1.78"
	// DefaultHeartbeatTimeout is used until lookup tells us the API's
	// heartbeat_timeout (Ironic's default is 300 s).
	DefaultHeartbeatTimeout = 300 * time.Second
	// MinHeartbeatInterval is IPA's floor for a derived interval.
	MinHeartbeatInterval = 5 * time.Second
	// DefaultLookupBackoffMax caps the wait between lookups.
	DefaultLookupBackoffMax = 30 * time.Second
	// DefaultAPITimeout bounds one lookup or heartbeat request.
	DefaultAPITimeout = 30 * time.Second
	// Version is reported as agent_version.
	Version = "ironflow-agent 1.0"
)

// Config configures an Agent.
type Config struct {
	// APIURL is the ironflow (Ironic-compatible) API, e.g. http://10.0.0.1:6385.
	APIURL string
	// LookupAddresses are the MAC addresses sent to /v1/lookup.
	LookupAddresses []string
	// NodeUUID, when known (virtual media), is sent with the lookup.
	NodeUUID string
	// AgentToken is a pre-generated token (virtual media); empty means the
	// first lookup issues one.
	AgentToken string
	// ListenAddr is where the command API listens (DefaultListenAddr).
	ListenAddr string
	// AdvertiseHost is the host put in callback_url; empty means the
	// listener's IP, or the local address that routes to the API.
	AdvertiseHost string
	// Insecure serves the command API over plain HTTP (labs); otherwise
	// HTTPS with a self-signed certificate sent as agent_verify_ca.
	Insecure bool
	// HeartbeatInterval overrides the interval derived from the API's
	// heartbeat_timeout (0.3–0.6 × it, at least 5 s).
	HeartbeatInterval time.Duration
	// APIVersion is the X-OpenStack-Ironic-API-Version sent.
	APIVersion string
	// APIClient talks to the API (lookup, heartbeat). Default: a client
	// with DefaultAPITimeout.
	APIClient *http.Client
	// DownloadClient fetches images, checksum files and config drives.
	DownloadClient *http.Client
	// Hardware is the machine. Required.
	Hardware Hardware
	// MinRootDiskSize is the smallest disk chosen without hints (Ironic: 4 GiB).
	MinRootDiskSize int64
	// Download tunes image downloads.
	Download DownloadConfig
	// BeforeCommand, when set, runs before every command; an error fails
	// the command. The simulated agent injects latency and faults here.
	BeforeCommand func(ctx context.Context, name string) error
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// LookupBackoffMax caps the wait between lookups.
	LookupBackoffMax time.Duration
	// SystemdBoot is the systemd-boot EFI binary install_bootloader puts
	// on a partition image's ESP (DefaultSystemdBoot, which the ramdisk
	// builder copies from the build host).
	SystemdBoot string
	// GRUBDir holds GRUB's boot.img and the core images install_bootloader
	// embeds for a partition image in BIOS boot mode (DefaultGRUBDir,
	// where the ramdisk builder puts them).
	GRUBDir string
	// CustomDeploySteps are deploy steps offered besides the agent's own
	// (agent/custom_steps.go): a custom-agent deploy runs the one its user
	// names. A step of the same name as one of the agent's own is ignored.
	CustomDeploySteps []CustomStep
}

// Agent is one running agent.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	api     *url.URL
	ln      net.Listener
	srv     *http.Server
	caPEM   []byte
	started time.Time

	mu               sync.Mutex
	nodeUUID         string
	token            string
	heartbeatTimeout time.Duration
	lookupNode       map[string]any
	callbackURL      string

	cmds commandStore

	forceHB    chan struct{}
	heartbeats atomic.Bool // false pauses heartbeating (fault injection)
	rescued    atomic.Bool // finalize_rescue set the rescue user up
	lockedDown atomic.Bool // system.lockdown stopped the agent
	hbMu       sync.Mutex  // held while a heartbeat is in flight
	hbCount    atomic.Int64
	lookedUp   chan struct{}
	lookupOnce sync.Once
	done       chan struct{}
	cancel     context.CancelFunc
	bgCtx      context.Context
	wg         sync.WaitGroup
	// cmdWG tracks running asynchronous commands; cmdMu orders their Add
	// against shutdown.
	cmdWG sync.WaitGroup
	cmdMu sync.Mutex
}

// New validates cfg and returns an Agent; Start runs it.
func New(cfg Config) (*Agent, error) {
	if cfg.Hardware == nil {
		return nil, errors.New("agent config: Hardware is required")
	}
	api, err := url.Parse(cfg.APIURL)
	if err != nil || api.Host == "" {
		return nil, fmt.Errorf("agent config: API URL %q is not a URL", cfg.APIURL)
	}
	if len(cfg.LookupAddresses) == 0 && cfg.NodeUUID == "" {
		return nil, errors.New("agent config: no MAC address or node UUID to look up")
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = DefaultListenAddr
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if cfg.APIClient == nil {
		cfg.APIClient = &http.Client{Timeout: DefaultAPITimeout}
	}
	if cfg.DownloadClient == nil {
		cfg.DownloadClient = defaultDownloadClient()
	}
	if cfg.MinRootDiskSize == 0 {
		cfg.MinRootDiskSize = DefaultMinRootDiskSize
	}
	if cfg.SystemdBoot == "" {
		cfg.SystemdBoot = DefaultSystemdBoot
	}
	if cfg.GRUBDir == "" {
		cfg.GRUBDir = DefaultGRUBDir
	}
	if cfg.LookupBackoffMax == 0 {
		cfg.LookupBackoffMax = DefaultLookupBackoffMax
	}
	cfg.Download = cfg.Download.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Agent{
		cfg:              cfg,
		log:              cfg.Logger,
		api:              api,
		heartbeatTimeout: DefaultHeartbeatTimeout,
		forceHB:          make(chan struct{}, 1),
		lookedUp:         make(chan struct{}),
		done:             make(chan struct{}),
	}
	a.heartbeats.Store(true)
	return a, nil
}

// Start opens the command API listener and starts lookup and heartbeating in
// the background; it returns once the agent is listening. Cancel ctx (or call
// Stop) to stop the agent.
func (a *Agent) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen for the command API on %s: %w", a.cfg.ListenAddr, err)
	}
	host, err := a.advertiseHost(ln)
	if err != nil {
		ln.Close()
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	scheme := "https"
	if a.cfg.Insecure {
		scheme = "http"
	} else {
		cert, pemBytes, err := selfSignedCert(host)
		if err != nil {
			ln.Close()
			return err
		}
		a.caPEM = pemBytes
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	a.ln = ln
	a.callbackURL = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)))
	a.started = time.Now()
	a.srv = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}

	a.bgCtx, a.cancel = context.WithCancel(ctx)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("command API stopped", "err", err)
		}
	}()
	go func() {
		defer a.wg.Done()
		a.lookupAndHeartbeat(a.bgCtx)
	}()
	go func() {
		<-a.bgCtx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = a.srv.Shutdown(sctx)
	}()
	go func() {
		a.wg.Wait()
		// No command starts once the context is cancelled (startCommand
		// checks it under cmdMu), so cmdWG can be waited on safely.
		a.cmdMu.Lock()
		a.cmdMu.Unlock() //nolint:staticcheck // a barrier, see above
		a.cmdWG.Wait()
		close(a.done)
	}()
	a.log.Info("agent listening", "callback_url", a.callbackURL, "api", a.api.Redacted())
	return nil
}

// Run starts the agent and blocks until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	<-a.done
	return nil
}

// Stop stops the agent and waits for its goroutines; running commands are
// cancelled.
func (a *Agent) Stop() {
	if a.cancel != nil {
		a.cancel()
		<-a.done
	}
}

// Done is closed once the agent has stopped.
func (a *Agent) Done() <-chan struct{} { return a.done }

// CallbackURL is the command API URL sent in heartbeats.
func (a *Agent) CallbackURL() string { return a.callbackURL }

// CACertPEM is the certificate sent as agent_verify_ca (nil when insecure).
func (a *Agent) CACertPEM() []byte { return a.caPEM }

// NodeUUID is the node found by lookup ("" before).
func (a *Agent) NodeUUID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeUUID
}

// LookedUp is closed once lookup succeeded.
func (a *Agent) LookedUp() <-chan struct{} { return a.lookedUp }

// Heartbeats returns how many heartbeats the API accepted.
func (a *Agent) Heartbeats() int64 { return a.hbCount.Load() }

// SetHeartbeating pauses (false) or resumes (true) heartbeats; the simulated
// agent uses it to play a node whose agent went silent. When it returns no
// heartbeat is in flight any more.
func (a *Agent) SetHeartbeating(on bool) {
	a.hbMu.Lock()
	defer a.hbMu.Unlock()
	a.heartbeats.Store(on)
}

// ForceHeartbeat heartbeats now rather than at the next interval, as IPA does
// after each command so the control plane learns quickly.
func (a *Agent) ForceHeartbeat() {
	select {
	case a.forceHB <- struct{}{}:
	default:
	}
}

func (a *Agent) currentToken() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// advertiseHost picks the host for callback_url: configured, the listener's
// own IP, or the local address the kernel would use to reach the API.
func (a *Agent) advertiseHost(ln net.Listener) (string, error) {
	if a.cfg.AdvertiseHost != "" {
		return a.cfg.AdvertiseHost, nil
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; ip != nil && !ip.IsUnspecified() {
		return ip.String(), nil
	}
	apiHost := a.api.Host
	if a.api.Port() == "" {
		port := "80"
		if a.api.Scheme == "https" {
			port = "443"
		}
		apiHost = net.JoinHostPort(a.api.Hostname(), port)
	}
	// A UDP "connection" sends nothing: it only asks the kernel for a route.
	c, err := net.Dial("udp", apiHost)
	if err != nil {
		return "", fmt.Errorf("find the local address that reaches the API at %s: %w", apiHost, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// heartbeatInterval follows IPA: a random 0.3–0.6 of heartbeat_timeout, at
// least MinHeartbeatInterval, unless configured.
func (a *Agent) heartbeatInterval() time.Duration {
	if a.cfg.HeartbeatInterval > 0 {
		return a.cfg.HeartbeatInterval
	}
	a.mu.Lock()
	t := a.heartbeatTimeout
	a.mu.Unlock()
	d := time.Duration(float64(t) * (0.3 + 0.3*rand.Float64()))
	return max(d, MinHeartbeatInterval)
}

// Token returns the agent token for callers in the same process (tests,
// the simulated agent's client). It is never logged.
func (a *Agent) Token() string { return a.currentToken() }
