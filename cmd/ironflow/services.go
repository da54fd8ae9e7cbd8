package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/console/web"
	"github.com/ironflow/ironflow/inspection/hooks"
	"github.com/ironflow/ironflow/inspection/rules"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/worker"
	"github.com/ironflow/ironflow/workflows"
)

// Named defaults (docs/configuration.md).
const (
	defaultTemporalAddress = "127.0.0.1:7233"
	defaultNamespace       = "default"
	defaultBootListen      = "127.0.0.1:8080"
)

// databaseStartWait is how long a process starting while its database
// does not answer (connection refused, timed out: PostgreSQL restarting,
// or started after ironflow) waits for it, logging each try, before it
// gives up (docs/production.md, "Starting order"). A database that
// answers with an error (a wrong password, no such database) fails the
// start at once.
var databaseStartWait = 2 * time.Minute

func openStore(ctx context.Context, url string, migrate bool) (*store.Store, error) {
	return openStoreWaiting(ctx, url, migrate, databaseStartWait, slog.Default())
}

// openStoreWaiting opens the database, waiting up to wait for one that
// does not answer yet.
func openStoreWaiting(ctx context.Context, url string, migrate bool, wait time.Duration, log *slog.Logger) (*store.Store, error) {
	if url == "" {
		return nil, errors.New("no database: set --database-url or DATABASE_URL (postgres://user@host:port/db), or use 'ironflow dev' for an embedded PostgreSQL")
	}
	deadline := time.Now().Add(wait)
	delay := 500 * time.Millisecond
	var st *store.Store
	for attempt := 1; ; attempt++ {
		var err error
		st, err = store.Open(ctx, url)
		if err == nil {
			if attempt > 1 {
				log.Info("database answers", "attempts", attempt)
			}
			break
		}
		if !store.IsUnavailable(err) || time.Now().Add(delay).After(deadline) {
			if store.IsUnavailable(err) && attempt > 1 {
				return nil, fmt.Errorf("open database: it did not answer in %s (%d tries): %w", wait, attempt, err)
			}
			return nil, fmt.Errorf("open database: %w", err)
		}
		log.Warn("database does not answer yet: waiting", "attempt", attempt, "retry_in", delay.String(), "gives_up_in", time.Until(deadline).Round(time.Second).String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open database: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
	if migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate database: %w", err)
		}
	}
	return st, nil
}

// dialTemporal connects to Temporal; every payload the client (and the
// workers built on it) sends is sealed by codec (package payload).
func dialTemporal(address, namespace string, tlsFlags temporalTLSFlags, codec *payload.Codec, log *slog.Logger) (client.Client, error) {
	opts := client.Options{
		HostPort:  address,
		Namespace: namespace,
		Logger:    tlog.NewStructuredLogger(log.With("component", "temporal")),
	}
	if err := tlsFlags.apply(&opts); err != nil {
		return nil, err
	}
	// No gRPC compression: what ironflow sends is mostly payloads the codec
	// has sealed (AES-GCM), which gzip cannot shrink, and compressing every
	// request cost the worker about 6 % of its CPU in a profile of agent
	// deploys (docs/benchmarks.md, "What moved the figures").
	opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	codec.Apply(&opts)
	opts.MetricsHandler = temporalMetrics()
	opts.Interceptors = append(opts.Interceptors, processTracing.Interceptors()...)
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w; %s", address, namespace, err, tlsFlags.explain(err))
	}
	return c, nil
}

// connect opens the database and the Temporal client a process needs.
func connect(ctx context.Context, dbURL, temporalAddr, namespace string, tlsFlags temporalTLSFlags, codec *payload.Codec, log *slog.Logger) (*store.Store, client.Client, func(), error) {
	st, err := openStore(ctx, dbURL, false)
	if err != nil {
		return nil, nil, nil, err
	}
	tc, err := dialTemporal(temporalAddr, namespace, tlsFlags, codec, log)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, tc, func() { tc.Close(); st.Close() }, nil
}

// serveHTTP serves h on addr until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, name, addr string, h http.Handler, limits httpLimits, log *slog.Logger) (string, <-chan error, error) {
	tlsCfg, err := limits.tls.config(name)
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, TLSConfig: tlsCfg}
	limits.apply(srv)
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info(name+" listening", "address", l.Addr().String(), "scheme", limits.tls.scheme())
	return l.Addr().String(), done, nil
}

// apiFlags are the API's settings.
type apiFlags struct {
	listen, databaseURL, temporal, namespace, auth, htpasswd, publicURL *string
	heartbeatTimeout                                                    *time.Duration
	maxLimit                                                            *int
	inspectionWithoutToken                                              *bool
	conductorTimeout                                                    *time.Duration
	consoleTokenTTL                                                     *time.Duration
	consoleNoVNCDir, consoleOrigins                                     *string
	limits                                                              httpLimits
	tls                                                                 httpTLS
	signal                                                              signalKeyFlags
	payload                                                             payloadKeyFlags
	temporalTLS                                                         temporalTLSFlags
	keystone                                                            keystoneFlags
	metricsListen                                                       *string
	otelEndpoint                                                        *string
}

// signalKeyFlags name the key the API signs heartbeat signals with and the
// worker verifies them with (package signature; docs/configuration.md).
type signalKeyFlags struct{ value, file, previous *string }

func addSignalKeyFlags(s *settings) signalKeyFlags {
	return signalKeyFlags{
		value:    s.String("signal-key", "", "key that authenticates heartbeat signals; the same for ironflow api and ironflow worker"),
		file:     s.String("signal-key-file", "", "file holding the signal key on its first line and optionally the previous key on its second"),
		previous: s.String("signal-key-previous", "", "previous signal key, still accepted while a rotation is under way"),
	}
}

func (f signalKeyFlags) load() (signature.Keys, error) {
	return signature.Load(*f.value, *f.file, *f.previous)
}

func addAPIFlags(s *settings) apiFlags {
	return apiFlags{
		listen:           s.String("listen", apiserver.DefaultListen, "API listen address"),
		databaseURL:      s.String("database-url", "", "PostgreSQL URL", "DATABASE_URL"),
		temporal:         s.String("temporal-address", defaultTemporalAddress, "Temporal frontend host:port", "TEMPORAL_ADDRESS"),
		namespace:        s.String("temporal-namespace", defaultNamespace, "Temporal namespace", "TEMPORAL_NAMESPACE"),
		auth:             s.String("auth-strategy", apiserver.AuthNoAuth, "noauth, http_basic or keystone"),
		htpasswd:         s.String("htpasswd-file", "", "bcrypt htpasswd file for http_basic"),
		publicURL:        s.String("public-url", "", "base URL of links and Location headers (default: from the request)"),
		heartbeatTimeout: s.Duration("ramdisk-heartbeat-timeout", apiserver.DefaultConfig().RamdiskHeartbeatTimeout, "heartbeat_timeout sent to agents"),
		maxLimit:         s.Int("max-limit", apiserver.DefaultConfig().MaxLimit, "largest page of a list"),
		inspectionWithoutToken: s.Bool("inspection-without-agent-token", false,
			"accept continue_inspection from an agent that did not look up (no agent token): anyone on the provisioning network can then write inventories"),
		conductorTimeout: s.Duration("conductor-heartbeat-timeout", apiserver.DefaultConductorHeartbeatTimeout, "a worker (conductor) is alive while its last heartbeat is this recent"),
		consoleTokenTTL:  s.Duration("console-token-ttl", console.DefaultTokenTTL, "how long the token of a node console's browser page is valid (docs/console.md)"),
		consoleNoVNCDir:  s.String("console-novnc-dir", web.DefaultNoVNCDir, "directory of Debian's novnc files, served for the graphical console page (docs/console.md)"),
		consoleOrigins:   s.String("console-allowed-origins", "", "comma-separated host[:port] patterns of other pages that may open console websockets (docs/console.md)"),
		// A 64 MiB config drive must upload within the read timeout.
		limits: addHTTPLimits(s, "api", 5*time.Minute, 5*time.Minute, 2*time.Minute),
		tls:    addHTTPTLS(s, "", "API"),
		signal: addSignalKeyFlags(s),

		// Seals every payload the API hands to Temporal (docs/security.md).
		payload:     addPayloadKeyFlags(s),
		temporalTLS: addTemporalTLSFlags(s),
		keystone:    addKeystoneFlags(s),

		metricsListen: addMetricsListen(s, defaultAPIMetricsListen),
		otelEndpoint:  addOTelEndpoint(s),
	}
}

// serving is how the API's server serves: its limits and TLS.
func (f apiFlags) serving() httpLimits {
	l := f.limits
	l.tls = f.tls
	return l
}

func (f apiFlags) config() apiserver.Config {
	cfg := apiserver.DefaultConfig()
	cfg.Listen = *f.listen
	cfg.AuthStrategy = *f.auth
	cfg.HtpasswdFile = *f.htpasswd
	cfg.Keystone = f.keystone.config()
	cfg.PublicURL = *f.publicURL
	cfg.RamdiskHeartbeatTimeout = *f.heartbeatTimeout
	cfg.MaxLimit = *f.maxLimit
	cfg.InspectionWithoutToken = *f.inspectionWithoutToken
	cfg.ConductorHeartbeatTimeout = *f.conductorTimeout
	cfg.ConsoleTokenTTL = *f.consoleTokenTTL
	cfg.ConsoleNoVNCDir = *f.consoleNoVNCDir
	for _, o := range strings.Split(*f.consoleOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.ConsoleAllowedOrigins = append(cfg.ConsoleAllowedOrigins, o)
		}
	}
	if h, err := os.Hostname(); err == nil {
		cfg.ConductorName = h
	}
	return cfg
}

func startAPI(ctx context.Context, cfg apiserver.Config, limits httpLimits, st *store.Store, tc client.Client, log *slog.Logger) (string, <-chan error, error) {
	h, err := apiserver.New(cfg, st, &apiserver.TemporalEngine{Client: tc}, log.With("component", "api"))
	if err != nil {
		return "", nil, err
	}
	if warnHostLinks(cfg) {
		log.Warn("--public-url is unset on a non-loopback listen address: links and Location headers are built from each request's Host header, which a client chooses; set --public-url (docs/security.md)", "listen", cfg.Listen)
	}
	return serveHTTP(ctx, "api", cfg.Listen, h, limits, log)
}

// warnHostLinks reports whether the API would build links from the Host
// header of requests that may come from other machines: --public-url unset
// and a listen address that is not loopback-only.
func warnHostLinks(cfg apiserver.Config) bool {
	if cfg.PublicURL != "" {
		return false
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// apiSettings builds ironflow api's flags.
func apiSettings() (*settings, apiFlags, glanceFlags) {
	s := newSettings("api")
	f := addAPIFlags(s)
	g := addGlanceFlags(s) // validate asks Glance about image_source
	return s, f, g
}

func runAPICommand(ctx context.Context, args []string) error {
	s, f, g := apiSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	cfg := f.config()
	if err := g.setAPI(&cfg); err != nil {
		return err
	}
	keys, err := f.signal.load()
	if err != nil {
		return err
	}
	cfg.SignalKey = keys.Current
	codec, err := f.payload.codec()
	if err != nil {
		return err
	}
	log := logger()
	stopTracing, err := startTracing(*f.otelEndpoint, "ironflow-api", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	st, tc, closeAll, err := connect(ctx, *f.databaseURL, *f.temporal, *f.namespace, f.temporalTLS, codec, log)
	if err != nil {
		return err
	}
	defer closeAll()
	if _, err := serveMetrics(ctx, *f.metricsListen, st, log); err != nil {
		return err
	}
	_, done, err := startAPI(ctx, cfg, f.serving(), st, tc, log)
	if err != nil {
		return err
	}
	return <-done
}

// workerFlags are the worker's settings.
type workerFlags struct {
	databaseURL, temporal, namespace, groups, apiURL, bootURL, kernelParams        *string
	agentArchs, kernelParamsAArch64, inspectionParams                              *string
	inspectionHooks, physnetCIDRMap, pciAlias, builtInRules, maskSecrets           *string
	addPorts, keepPorts                                                            *string
	updatePXEEnabled                                                               *bool
	callbackTimeout, rescueTimeout, heartbeatTimeout, operatorWait, bmcCallTimeout *time.Duration
	syncInterval                                                                   *time.Duration
	reconcileInterval, reconcileGrace, reconcileLookback                           *time.Duration
	sensorsInterval                                                                *time.Duration
	sensorsMaxNodes                                                                *int
	isoDir, imagesDir                                                              *string
	hostname                                                                       *string
	consoleListen, consolePorts                                                    *string
	conductorInterval                                                              *time.Duration
	bmcAttempts, maxActivities, wfPollers, actPollers                              *int
	automatedClean, agentInsecure, healthMonitoring                                *bool
	ipxeByArch, loaderURL                                                          *string
	glance                                                                         glanceFlags
	signal                                                                         signalKeyFlags
	payload                                                                        payloadKeyFlags
	temporalTLS                                                                    temporalTLSFlags
	metricsListen                                                                  *string
	otelEndpoint                                                                   *string
}

func addWorkerFlags(s *settings, shared *apiFlags) workerFlags {
	p := activities.DefaultPolicy()
	f := workerFlags{
		groups:       s.String("conductor-groups", "", "comma-separated conductor groups whose hardware this worker reaches (empty: the default group)"),
		apiURL:       s.String("agent-api-url", "http://127.0.0.1:6385", "the API as agents reach it (ipa-api-url)"),
		bootURL:      s.String("boot-url", "http://"+defaultBootListen, "the PXE HTTP service as machines reach it"),
		kernelParams: s.String("agent-kernel-params", "console=ttyS0", "extra kernel parameters for the agent"),
		agentArchs: s.String("agent-architectures", strings.Join(activities.DefaultAgentArchitectures, ","),
			"comma-separated cpu_arch values the boot service has an agent and a loader for (x86_64, aarch64: make ramdisk-arm64); a node of another architecture fails before power-on"),
		kernelParamsAArch64: s.String("agent-kernel-params-aarch64", activities.DefaultAgentKernelParamsAArch64, "extra kernel parameters for the aarch64 agent"),
		inspectionParams: s.String("inspection-kernel-params", activities.DefaultInspectionKernelParams,
			"extra kernel parameters for the agent when it boots to inspect (Ironic's [inspector]extra_kernel_params; the default collects LLDP)"),
		inspectionHooks: s.String("inspection-hooks", strings.Join(hooks.DefaultHooks, ","),
			"comma-separated inspection hooks an in-band inspection runs, in order (Ironic's [inspector]hooks; optional: boot-mode, physical-network, pci-devices; docs/inspection.md)"),
		physnetCIDRMap: s.String("inspection-physical-network-cidr-map", "",
			"comma-separated <cidr>:<physical network> entries the physical-network hook sets ports' physical_network from (Ironic's [inspector]physical_network_cidr_map)"),
		addPorts: s.String("inspection-add-ports", "all",
			"which inspected interfaces become ports: all, pxe (the PXE interface only), active (those with an IP address) or disabled (Ironic's [inspector]add_ports)"),
		keepPorts: s.String("inspection-keep-ports", "all",
			"which ports an inspection keeps: all, present (those whose MAC the inventory has) or added (those add_ports selects) (Ironic's [inspector]keep_ports)"),
		updatePXEEnabled: s.Bool("inspection-update-pxe-enabled", true,
			"inspection brings existing ports' pxe_enabled in line with the inventory's PXE interface (Ironic's [inspector]update_pxe_enabled)"),
		builtInRules: s.String("inspection-rules-built-in", "",
			"a YAML file of inspection rules that run with the stored ones, not listed by the API (Ironic's [inspection_rules]built_in_rules; docs/inspection.md)"),
		maskSecrets: s.String("inspection-rules-mask-secrets", "always",
			"which inspection rules see BMC passwords and tokens as \"***\": always, sensitive (rules not marked sensitive) or never (Ironic's [inspection_rules]mask_secrets)"),
		pciAlias: s.String("inspection-pci-device-alias", "",
			`a JSON list of {"vendor_id", "product_id", "name"} the pci-devices hook counts into capabilities (Ironic's [inspector]pci_device_alias)`),
		callbackTimeout:   s.Duration("deploy-callback-timeout", p.CallbackTimeout, "how long to wait for the agent's first heartbeat"),
		rescueTimeout:     s.Duration("rescue-callback-timeout", p.RescueCallbackTimeout, "how long rescue wait waits for the rescue agent's first heartbeat"),
		heartbeatTimeout:  s.Duration("agent-heartbeat-timeout", p.HeartbeatTimeout, "a running agent step fails after this long without a heartbeat"),
		operatorWait:      s.Duration("operator-wait-timeout", p.OperatorWaitTimeout, "how long a failed step waits for retry/skip-step/abort"),
		bmcCallTimeout:    s.Duration("bmc-call-timeout", p.BMCCallTimeout, "bound of one BMC activity attempt"),
		syncInterval:      s.Duration("sync-power-state-interval", workflows.DefaultPowerSyncInterval, "how often each conductor group's power states are read from the BMCs (0 disables)"),
		sensorsInterval:   s.Duration("sensors-interval", 0, "how often the hardware sensors of the worker's nodes are read from their BMCs (Redfish, IPMI SDR) and served at the metrics address's /metrics/sensors (0: never; docs/metrics.md)"),
		sensorsMaxNodes:   s.Int("sensors-max-nodes", activities.DefaultSensorsMaxNodes, "the most nodes whose sensors this worker reads and serves (docs/metrics.md, Hardware sensors)"),
		reconcileInterval: s.Duration("reconcile-interval", workflows.DefaultReconcileInterval, "how often each conductor group's reconciler compares nodes with their workflows (0 disables; docs/crash-safety.md)"),
		reconcileGrace:    s.Duration("reconcile-grace", workflows.DefaultReconcileGrace, "how old a node's transient state must be before the reconciler judges it"),
		reconcileLookback: s.Duration("reconcile-lookback", workflows.DefaultReconcileLookback, "how far back the reconciler reads closed workflows (cover the age of a database backup you may restore)"),
		bmcAttempts:       s.Int("bmc-attempts", int(p.BMCAttempts), "attempts of a BMC call before the step fails"),
		maxActivities:     s.Int("max-concurrent-activities", worker.DefaultMaxConcurrentActivities, "hardware activities run at once per conductor group"),
		wfPollers:         s.Int("workflow-task-pollers", worker.DefaultWorkflowTaskPollers, "long polls the worker keeps open for workflow tasks"),
		actPollers:        s.Int("activity-task-pollers", worker.DefaultActivityTaskPollers, "long polls the worker keeps open for hardware activity tasks, per conductor group"),
		automatedClean:    s.Bool("automated-clean", true, "clean nodes through the agent on provide and undeploy"),
		agentInsecure:     s.Bool("agent-insecure", false, "do not verify agents' TLS certificates (labs)"),
		healthMonitoring:  s.Bool("health-monitoring", true, "read each node's hardware health from its BMC in the power-state sync (Ironic's [conductor] enable_health_monitoring; one more BMC query per node and tick)"),
		glance:            addGlanceFlags(s),
		ipxeByArch: s.String("ipxe-bootfile-name-by-arch", "x86_64:"+pxe.DefaultHTTPIPXELoader,
			"cpu_arch:file,... the iPXE loader a node with boot interface http-ipxe fetches over UEFI HTTP boot from the boot service's /loaders/ (Ironic's [pxe]ipxe_bootfile_name_by_arch)"),
		loaderURL: s.String("http-boot-loader-url", "", "the boot service UEFI HTTP boot fetches loaders from, e.g. an https:// one (default: --boot-url)"),
	}
	host, _ := os.Hostname()
	f.hostname = s.String("conductor-hostname", host, "the name this worker registers as a conductor (GET /v1/conductors); unique per worker")
	s.defaultText("conductor-hostname", "the host name")
	f.conductorInterval = s.Duration("conductor-heartbeat-interval", worker.DefaultHeartbeatInterval, "how often the worker records that it is alive")
	f.consoleListen = s.String("console-listen", "127.0.0.1", "the address the worker's node console endpoints listen on (docs/console.md)")
	f.consolePorts = s.String("console-port-range", "", "MIN:MAX ports of the console endpoints, as Ironic's [console] port_range (empty: any free port)")
	if shared != nil {
		f.databaseURL, f.temporal, f.namespace = shared.databaseURL, shared.temporal, shared.namespace
		f.signal, f.payload, f.temporalTLS = shared.signal, shared.payload, shared.temporalTLS
		f.metricsListen = shared.metricsListen
		f.otelEndpoint = shared.otelEndpoint
	} else {
		f.metricsListen = addMetricsListen(s, defaultWorkerMetricsListen)
		f.otelEndpoint = addOTelEndpoint(s)
		f.signal = addSignalKeyFlags(s)
		f.payload = addPayloadKeyFlags(s)
		f.temporalTLS = addTemporalTLSFlags(s)
		// ironflow dev shares these with its boot service (addBootFlags).
		f.isoDir = s.String("iso-dir", "", "where this worker builds agent ISOs for virtual media; the boot service must serve the same directory under /iso/ (empty: no virtual media)")
		f.imagesDir = s.String("images-dir", "", "the agent kernel and initramfs (agent.kernel, agent.initramfs) the ISOs are built from")
		f.databaseURL = s.String("database-url", "", "PostgreSQL URL", "DATABASE_URL")
		f.temporal = s.String("temporal-address", defaultTemporalAddress, "Temporal frontend host:port", "TEMPORAL_ADDRESS")
		f.namespace = s.String("temporal-namespace", defaultNamespace, "Temporal namespace", "TEMPORAL_NAMESPACE")
	}
	return f
}

func (f workerFlags) activitiesConfig() activities.Config {
	p := activities.DefaultPolicy()
	p.CallbackTimeout = *f.callbackTimeout
	p.RescueCallbackTimeout = *f.rescueTimeout
	p.HeartbeatTimeout = *f.heartbeatTimeout
	p.OperatorWaitTimeout = *f.operatorWait
	p.BMCCallTimeout = *f.bmcCallTimeout
	p.BMCAttempts = int32(*f.bmcAttempts)
	return activities.Config{
		Policy:                  p,
		AutomatedClean:          *f.automatedClean,
		APIURL:                  *f.apiURL,
		BootURL:                 *f.bootURL,
		AgentKernelParams:       *f.kernelParams,
		InspectionKernelParams:  *f.inspectionParams,
		AgentArchitectures:      splitList(*f.agentArchs),
		AgentKernelParamsByArch: map[string]string{activities.ArchAArch64: *f.kernelParamsAArch64},
		AgentInsecure:           *f.agentInsecure,
		Conductor:               *f.hostname,

		DisableHealthMonitoring: !*f.healthMonitoring,
	}
}

func (f workerFlags) options() worker.Options {
	var groups []string
	for _, g := range strings.Split(*f.groups, ",") {
		groups = append(groups, strings.TrimSpace(g))
	}
	return worker.Options{ConductorGroups: groups, MaxConcurrentActivities: *f.maxActivities,
		WorkflowTaskPollers: *f.wfPollers, ActivityTaskPollers: *f.actPollers}
}

// hookSettings reads the hook settings: every hook named is known,
// ramdisk-error and validate-interfaces stay in (Ironic's hooks need
// them), the CIDR map and the PCI aliases parse.
func (f workerFlags) hookSettings() ([]string, hooks.Config, error) {
	var cfg hooks.Config
	names := splitList(*f.inspectionHooks)
	for _, n := range names {
		if !slices.Contains(hooks.Known, n) {
			return nil, cfg, fmt.Errorf("--inspection-hooks: unknown hook %q (known: %s)", n, strings.Join(hooks.Known, ", "))
		}
	}
	for _, must := range []string{hooks.RamdiskError, hooks.ValidateInterfaces} {
		if !slices.Contains(names, must) {
			return nil, cfg, fmt.Errorf("--inspection-hooks: %s is required (the other hooks read what it checks)", must)
		}
	}
	switch *f.addPorts {
	case "all", "pxe", "active", "disabled":
		cfg.AddPorts = *f.addPorts
	default:
		return nil, cfg, fmt.Errorf("--inspection-add-ports %q: want all, pxe, active or disabled", *f.addPorts)
	}
	switch *f.keepPorts {
	case "all", "present", "added":
		cfg.KeepPorts = *f.keepPorts
	default:
		return nil, cfg, fmt.Errorf("--inspection-keep-ports %q: want all, present or added", *f.keepPorts)
	}
	cfg.KeepPXEEnabled = !*f.updatePXEEnabled
	cfg.PhysicalNetworkCIDRMap = splitList(*f.physnetCIDRMap)
	if _, err := hooks.ParseCIDRMap(cfg.PhysicalNetworkCIDRMap); err != nil {
		return nil, cfg, fmt.Errorf("--inspection-physical-network-cidr-map: %w", err)
	}
	if *f.pciAlias != "" {
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(*f.pciAlias), &list); err != nil {
			return nil, cfg, fmt.Errorf("--inspection-pci-device-alias: want a JSON list of objects: %w", err)
		}
		for _, raw := range list {
			a, err := hooks.ParsePCIAlias(string(raw))
			if err != nil {
				return nil, cfg, fmt.Errorf("--inspection-pci-device-alias: %w", err)
			}
			cfg.PCIDeviceAlias = append(cfg.PCIDeviceAlias, a)
		}
	}
	return names, cfg, nil
}

func startWorker(st *store.Store, tc client.Client, f workerFlags, vm activities.VirtualMedia, log *slog.Logger) (func(), error) {
	cfg := f.activitiesConfig()
	cfg.VirtualMedia = vm
	byArch, err := parseByArch(*f.ipxeByArch)
	if err != nil {
		return nil, fmt.Errorf("--ipxe-bootfile-name-by-arch: %w", err)
	}
	cfg.IPXEBootfileByArch = byArch
	cfg.LoaderBaseURL = *f.loaderURL
	if cfg.InspectionHooks, cfg.InspectionHookConfig, err = f.hookSettings(); err != nil {
		return nil, err
	}
	switch *f.maskSecrets {
	case "always", "sensitive", "never":
		cfg.RulesMaskSecrets = *f.maskSecrets
	default:
		return nil, fmt.Errorf("--inspection-rules-mask-secrets %q: want always, sensitive or never", *f.maskSecrets)
	}
	if *f.builtInRules != "" {
		if cfg.BuiltInRules, err = rules.LoadBuiltIn(*f.builtInRules); err != nil {
			return nil, fmt.Errorf("--inspection-rules-built-in: %w", err)
		}
		log.Info("built-in inspection rules loaded", "file", *f.builtInRules, "rules", len(cfg.BuiltInRules))
	}
	gc, err := f.glance.client()
	if err != nil {
		return nil, err
	}
	cfg.Glance, cfg.GlanceAuth = gc, *f.glance.auth
	cfg.ForceRawImages = *f.glance.forceRaw
	acts := activities.New(st, cfg, log.With("component", "activities"))
	ports, err := console.ParsePortRange(*f.consolePorts)
	if err != nil {
		return nil, err
	}
	acts.Consoles = &console.Manager{Host: *f.consoleListen, Ports: ports, Log: log.With("component", "console")}
	opts := f.options()
	opts.ConsoleHolder = *f.hostname
	if opts.SignalKeys, err = f.signal.load(); err != nil {
		return nil, err
	}
	apiCfg := apiserver.DefaultConfig()
	apiCfg.ConductorName = *f.hostname
	if opts.Rollouts, err = apiserver.NewNodeOperator(apiCfg, st, &apiserver.TemporalEngine{Client: tc}, log.With("component", "rollout")); err != nil {
		return nil, err
	}
	ws, err := worker.New(tc, acts, opts)
	if err != nil {
		return nil, err
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	worker.RestoreConsoles(rctx, acts, opts.ConductorGroups, log.With("component", "console"))
	rcancel()
	if err := worker.Start(ws); err != nil {
		acts.Consoles.StopAll()
		return nil, err
	}
	unwatch := worker.WatchConsoles(acts, activities.DefaultConsoleReconcileInterval, log.With("component", "console"))
	log.Info("worker started", "conductor_groups", *f.groups)
	unannounce, err := worker.Announce(context.Background(), st, worker.Conductor{
		Hostname: *f.hostname, ConductorGroups: f.options().ConductorGroups, Interval: *f.conductorInterval,
	}, log.With("component", "conductor"))
	if err != nil {
		unwatch()
		worker.Stop(ws)
		acts.Consoles.StopAll()
		return nil, err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, g := range f.options().ConductorGroups {
		run, err := worker.StartPowerSync(sctx, tc, g, *f.syncInterval)
		switch {
		case err != nil:
			log.Error("power sync not started", "conductor_group", g, "error", err)
		case run == nil:
			log.Info("power sync disabled", "conductor_group", g)
		default:
			log.Info("power sync running", "conductor_group", g, "workflow", run.GetID())
		}
		if *f.reconcileInterval <= 0 {
			log.Info("reconciler disabled", "conductor_group", g)
			continue
		}
		run, err = worker.StartReconciler(sctx, tc, workflows.ReconcileInput{ConductorGroup: g,
			Interval: *f.reconcileInterval, Grace: *f.reconcileGrace, Lookback: *f.reconcileLookback})
		if err != nil {
			log.Error("reconciler not started", "conductor_group", g, "error", err)
		} else {
			log.Info("reconciler running", "conductor_group", g, "workflow", run.GetID())
		}
	}
	sensorsCtx, stopSensors := context.WithCancel(context.Background())
	sensorsDone := make(chan struct{})
	go func() {
		defer close(sensorsDone)
		(&activities.SensorPoller{Activities: acts, Groups: f.options().ConductorGroups, Interval: *f.sensorsInterval,
			MaxNodes: *f.sensorsMaxNodes, Log: log.With("component", "sensors")}).Run(sensorsCtx)
	}()
	if *f.sensorsInterval > 0 {
		log.Info("sensors polled", "interval", *f.sensorsInterval, "max_nodes", *f.sensorsMaxNodes)
	}
	return func() {
		stopSensors()
		<-sensorsDone
		unannounce()
		worker.Stop(ws)
		// The consoles end with the process; the next worker of the group
		// to start takes them over (docs/console.md).
		unwatch()
		acts.Consoles.StopAll()
		// Log out of the Redfish sessions this worker kept open, so that
		// BMCs do not hold them until they time out.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bmc.CloseSessions(ctx)
	}, nil
}

// workerSettings builds ironflow worker's flags.
func workerSettings() (*settings, workerFlags) {
	s := newSettings("worker")
	return s, addWorkerFlags(s, nil)
}

func runWorkerCommand(ctx context.Context, args []string) error {
	s, f := workerSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	codec, err := f.payload.codec()
	if err != nil {
		return err
	}
	log := logger()
	stopTracing, err := startTracing(*f.otelEndpoint, "ironflow-worker", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	st, tc, closeAll, err := connect(ctx, *f.databaseURL, *f.temporal, *f.namespace, f.temporalTLS, codec, log)
	if err != nil {
		return err
	}
	defer closeAll()
	if _, err := serveMetrics(ctx, *f.metricsListen, nil, log); err != nil {
		return err
	}
	var vm activities.VirtualMedia
	if *f.isoDir != "" {
		if *f.imagesDir == "" {
			return errors.New("--iso-dir needs --images-dir: the agent kernel and initramfs the ISOs are built from")
		}
		vm = isoService{isos: pxe.AgentISOs{Dir: *f.isoDir}, imagesDir: *f.imagesDir, baseURL: *f.bootURL}
	}
	stop, err := startWorker(st, tc, f, vm, log)
	if err != nil {
		return err
	}
	defer stop()
	<-ctx.Done()
	return nil
}

// migrateSettings builds ironflow migrate's flags.
func migrateSettings() (*settings, *string) {
	s := newSettings("migrate")
	return s, s.String("database-url", "", "PostgreSQL URL", "DATABASE_URL")
}

func runMigrate(ctx context.Context, args []string) error {
	s, url := migrateSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	st, err := openStore(ctx, *url, true)
	if err != nil {
		return err
	}
	st.Close()
	fmt.Println("ironflow: database schema is up to date")
	return nil
}

// splitList is a comma-separated setting's non-empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseByArch reads an Ironic DictOpt "key:value,key:value" into a map; an
// empty string is an empty map (no architecture has a loader).
func parseByArch(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		k, val, ok := strings.Cut(e, ":")
		if k, val = strings.TrimSpace(k), strings.TrimSpace(val); !ok || k == "" || val == "" {
			return nil, fmt.Errorf("%q is not cpu_arch:file", e)
		}
		out[k] = val
	}
	return out, nil
}
