package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
)

// Redfish driver defaults. Ironic's [redfish] section uses 5 connection
// attempts 4 s apart; a BMC call inside a Temporal activity is retried by the
// activity as well, so the driver itself retries less.
const (
	DefaultRedfishTimeout       = 60 * time.Second // one HTTP request
	DefaultRedfishAttempts      = 3
	DefaultRedfishRetryInterval = 2 * time.Second
	DefaultRedfishAuthType      = authAuto
	// Dell BMCs refuse an insert right after an eject for a few seconds
	// (story 2008504): a bounded number of tries, redfish_connection_retry_interval
	// apart.
	DefaultMediaInsertAttempts = 4
)

func init() { Register("redfish", newRedfish) }

type redfishConfig struct {
	endpoint      string
	systemID      string
	username      string
	password      string
	verify        bool
	caPath        string
	authType      string
	timeout       time.Duration
	attempts      int
	retryInterval time.Duration
	power         powerTiming
}

func parseRedfishConfig(info map[string]any) (*redfishConfig, error) {
	if missing, _ := MissingKeys("redfish", info); len(missing) > 0 {
		return nil, missingError("Redfish", missing)
	}
	cfg := &redfishConfig{verify: true}
	addr, _ := infoString(info, "redfish_address")
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%w: redfish_address %q is not an http(s) URL or host", ErrInvalidConfig, addr)
	}
	cfg.endpoint = u.Scheme + "://" + u.Host
	cfg.systemID, _ = infoString(info, "redfish_system_id")
	cfg.username, _ = infoString(info, "redfish_username")
	if p, ok := info["redfish_password"]; ok && p != nil {
		cfg.password = fmt.Sprint(p) // not trimmed: spaces may be part of it
	}
	if v, ok := info["redfish_verify_ca"]; ok && v != nil {
		if b, ok := v.(bool); ok {
			cfg.verify = b
		} else {
			s, _ := infoString(info, "redfish_verify_ca")
			if b, ok := parseBoolWord(s); ok {
				cfg.verify = b
			} else if fileExists(s) {
				cfg.caPath = s
			} else {
				return nil, fmt.Errorf("%w: redfish_verify_ca %q is neither a boolean nor a CA bundle file", ErrInvalidConfig, s)
			}
		}
	}
	cfg.authType = DefaultRedfishAuthType
	if s, ok := infoString(info, "redfish_auth_type"); ok && s != "" {
		cfg.authType = strings.ToLower(s)
		if cfg.authType != authBasic && cfg.authType != authSession && cfg.authType != authAuto {
			return nil, fmt.Errorf("%w: redfish_auth_type %q is not basic, session or auto", ErrInvalidConfig, s)
		}
	}
	if cfg.timeout, err = infoDuration(info, "redfish_timeout", DefaultRedfishTimeout); err != nil {
		return nil, err
	}
	if cfg.attempts, err = infoInt(info, "redfish_connection_attempts", DefaultRedfishAttempts, 1, 100); err != nil {
		return nil, err
	}
	if cfg.retryInterval, err = infoDuration(info, "redfish_connection_retry_interval", DefaultRedfishRetryInterval); err != nil {
		return nil, err
	}
	if cfg.power, err = parsePowerTiming(info); err != nil {
		return nil, err
	}
	return cfg, nil
}

type redfishDriver struct {
	cfg *redfishConfig
	log *slog.Logger

	mu        sync.Mutex
	conn      *rfConn // nil after Close
	systemURI string  // resolved once per driver
}

func newRedfish(info map[string]any) (Driver, error) {
	cfg, err := parseRedfishConfig(info)
	if err != nil {
		return nil, err
	}
	log := slog.Default().With("bmc", cfg.endpoint, "driver", "redfish")
	conn, err := redfishSessions.acquire(cfg, log)
	if err != nil {
		return nil, err
	}
	return &redfishDriver{cfg: cfg, log: log, conn: conn}, nil
}

// Close releases this driver's hold on the cached session. The session stays
// cached for the next driver of the same BMC; the cache logs it out when it
// is evicted or on CloseSessions.
func (d *redfishDriver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		redfishSessions.release(d.conn)
		d.conn = nil
	}
	return nil
}

func (d *redfishDriver) call(ctx context.Context) (*rfCall, error) {
	d.mu.Lock()
	conn := d.conn
	d.mu.Unlock()
	if conn == nil {
		return nil, fmt.Errorf("%w: redfish driver for %s used after Close", ErrInvalidConfig, d.cfg.endpoint)
	}
	return &rfCall{conn: conn, ctx: ctx, timeout: d.cfg.timeout, attempts: d.cfg.attempts, retryInterval: d.cfg.retryInterval}, nil
}

// getJSON reads a document into v, for the links gofish does not expose.
func getJSON(c *rfCall, uri string, v any) error {
	resp, err := c.Get(uri)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: GET %s: not a Redfish document: %v", ErrUnsupported, uri, err)
	}
	return nil
}

// rfSystem is the ComputerSystem plus the links and annotations gofish does
// not expose.
type rfSystem struct {
	*redfish.ComputerSystem
	bootTargets  []string // BootSourceOverrideTarget@Redfish.AllowableValues
	virtualMedia string
	managedBy    []string
}

func (d *redfishDriver) system(c *rfCall) (*rfSystem, error) {
	uri, err := d.resolveSystem(c)
	if err != nil {
		return nil, err
	}
	resp, err := c.Get(uri)
	if err != nil {
		return nil, fmt.Errorf("read system %s: %w", uri, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var cs redfish.ComputerSystem
	var extra struct {
		Boot struct {
			Targets []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		}
		VirtualMedia common.Link
		Links        struct{ ManagedBy common.Links }
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("%w: system %s is not a ComputerSystem: %v", ErrUnsupported, uri, err)
	}
	_ = json.Unmarshal(b, &extra)
	cs.SetClient(c)
	if et := resp.Header.Get("ETag"); et != "" {
		cs.SetETag(et)
	}
	s := &rfSystem{ComputerSystem: &cs, bootTargets: extra.Boot.Targets, virtualMedia: extra.VirtualMedia.String()}
	for _, l := range extra.Links.ManagedBy {
		s.managedBy = append(s.managedBy, l.String())
	}
	return s, nil
}

// resolveSystem finds the system by following Systems from the service root:
// a redfish_system_id that is a path is used as given, a bare Id is matched
// against the members, and with none the service must have exactly one.
func (d *redfishDriver) resolveSystem(c *rfCall) (string, error) {
	d.mu.Lock()
	uri := d.systemURI
	d.mu.Unlock()
	if uri != "" {
		return uri, nil
	}
	id := d.cfg.systemID
	if strings.HasPrefix(id, "/") {
		uri = id
	} else {
		var root struct{ Systems common.Link }
		if err := getJSON(c, "/redfish/v1/", &root); err != nil {
			return "", fmt.Errorf("read service root: %w", err)
		}
		if root.Systems == "" {
			return "", fmt.Errorf("%w: service root links no Systems", ErrUnsupported)
		}
		members, err := collectionMembers(c, root.Systems.String())
		if err != nil {
			return "", fmt.Errorf("list systems: %w", err)
		}
		switch {
		case id != "":
			for _, m := range members {
				if path.Base(strings.TrimSuffix(m, "/")) == id {
					uri = m
				}
			}
			if uri == "" {
				return "", fmt.Errorf("%w: redfish_system_id %q matches none of %v", ErrInvalidConfig, id, members)
			}
		case len(members) == 1:
			uri = members[0]
		default:
			return "", fmt.Errorf("%w: redfish_system_id is required: the service has %d systems %v", ErrInvalidConfig, len(members), members)
		}
	}
	d.mu.Lock()
	d.systemURI = uri
	d.mu.Unlock()
	return uri, nil
}

func collectionMembers(c *rfCall, uri string) ([]string, error) {
	var col struct {
		Members  common.Links
		NextLink string `json:"Members@odata.nextLink"`
	}
	var out []string
	for page := 0; uri != "" && page < 100; page++ {
		col.Members, col.NextLink = nil, ""
		if err := getJSON(c, uri, &col); err != nil {
			return nil, err
		}
		for _, m := range col.Members {
			out = append(out, m.String())
		}
		uri = col.NextLink
	}
	return out, nil
}

func (d *redfishDriver) Validate(ctx context.Context) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	if _, err := d.system(c); err != nil {
		return fmt.Errorf("validate redfish BMC %s: %w", d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) PowerState(ctx context.Context) (PowerState, error) {
	c, err := d.call(ctx)
	if err != nil {
		return PowerUnknown, err
	}
	s, err := d.system(c)
	if err != nil {
		return PowerUnknown, fmt.Errorf("get power state from %s: %w", d.cfg.endpoint, err)
	}
	return ironicPower(s.PowerState), nil
}

// ironicPower maps like Ironic's redfish power interface: transitions count
// as the state being entered.
func ironicPower(p redfish.PowerState) PowerState {
	switch p {
	case redfish.OnPowerState, redfish.PoweringOnPowerState:
		return PowerOn
	case redfish.OffPowerState, redfish.PoweringOffPowerState:
		return PowerOff
	}
	return PowerUnknown
}

// pickReset returns the first of the wanted reset types the system allows.
// A service that lists no allowable values is assumed to accept all.
func pickReset(s *rfSystem, want ...redfish.ResetType) (redfish.ResetType, bool) {
	if len(s.SupportedResetTypes) == 0 {
		return want[0], true
	}
	for _, w := range want {
		if slices.Contains(s.SupportedResetTypes, w) {
			return w, true
		}
	}
	return "", false
}

func (d *redfishDriver) SetPower(ctx context.Context, action PowerAction) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	if err := d.setPower(c, action); err != nil {
		return fmt.Errorf("%s node via redfish %s: %w", action, d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) setPower(c *rfCall, action PowerAction) error {
	s, err := d.system(c)
	if err != nil {
		return err
	}
	cur := s.PowerState
	switch action {
	case ActionPowerOn:
		switch cur {
		case redfish.OnPowerState:
			d.log.Info("power on: already on, nothing to do")
			return nil
		case redfish.PoweringOnPowerState: // a previous attempt is under way
			return d.waitPower(c, redfish.OnPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
		}
		return d.powerOn(c, s)
	case ActionPowerOff:
		switch cur {
		case redfish.OffPowerState:
			d.log.Info("power off: already off, nothing to do")
			return nil
		case redfish.PoweringOffPowerState:
			return d.waitPower(c, redfish.OffPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
		}
		return d.forceOff(c, s)
	case ActionSoftOff:
		if cur == redfish.OffPowerState {
			d.log.Info("soft power off: already off, nothing to do")
			return nil
		}
		return d.softOff(c, s)
	case ActionReset:
		if cur == redfish.OffPowerState {
			return d.powerOn(c, s)
		}
		rt, ok := pickReset(s, redfish.ForceRestartResetType, redfish.GracefulRestartResetType)
		if !ok {
			return fmt.Errorf("%w: no reset type that restarts without a power off among %v", ErrUnsupported, s.SupportedResetTypes)
		}
		if err := d.reset(s, rt); err != nil {
			return err
		}
		return d.waitPower(c, redfish.OnPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
	case ActionReboot, ActionSoftReboot:
		if cur == redfish.OffPowerState {
			d.log.Info("reboot of a node that is off: powering it on")
			return d.powerOn(c, s)
		}
		return d.reboot(c, s, action == ActionSoftReboot)
	}
	return fmt.Errorf("%w: power action %q", ErrUnsupported, action)
}

func (d *redfishDriver) reset(s *rfSystem, rt redfish.ResetType) error {
	d.log.Info("redfish reset", "system", s.ODataID, "reset_type", rt)
	if err := s.Reset(rt); err != nil {
		return fmt.Errorf("ComputerSystem.Reset %s: %w", rt, err)
	}
	return nil
}

func (d *redfishDriver) powerOn(c *rfCall, s *rfSystem) error {
	rt, ok := pickReset(s, redfish.OnResetType, redfish.ForceOnResetType, redfish.PushPowerButtonResetType)
	if !ok {
		return fmt.Errorf("%w: no power-on reset type among %v", ErrUnsupported, s.SupportedResetTypes)
	}
	if err := d.reset(s, rt); err != nil {
		return err
	}
	return d.waitPower(c, redfish.OnPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
}

func (d *redfishDriver) forceOff(c *rfCall, s *rfSystem) error {
	rt, ok := pickReset(s, redfish.ForceOffResetType, redfish.PushPowerButtonResetType)
	if !ok {
		return fmt.Errorf("%w: no power-off reset type among %v", ErrUnsupported, s.SupportedResetTypes)
	}
	if err := d.reset(s, rt); err != nil {
		return err
	}
	return d.waitPower(c, redfish.OffPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
}

// softOff asks the OS to shut down and waits for the power to go off. BMCs
// accept GracefulShutdown even when no OS listens: a machine still on at the
// deadline fails the call and keeps its power, as Ironic's redfish soft
// power off (PowerStateFailure); the caller decides whether to cut it.
func (d *redfishDriver) softOff(c *rfCall, s *rfSystem) error {
	rt, ok := pickReset(s, redfish.GracefulShutdownResetType)
	if !ok {
		d.log.Warn("soft power off: GracefulShutdown not offered, forcing off", "allowed", s.SupportedResetTypes)
		return d.forceOff(c, s)
	}
	if err := d.reset(s, rt); err != nil {
		return err
	}
	timeout := powerTimeout(c.ctx, d.cfg.power.softOffTimeout)
	err := d.waitPower(c, redfish.OffPowerState, timeout)
	if err == nil || c.ctx.Err() != nil || !errors.Is(err, ErrBusy) {
		return err
	}
	d.log.Warn("graceful shutdown did not power the node off in time", "timeout", timeout, "error", err)
	return fmt.Errorf("%w (%v)", ErrSoftPowerOffTimeout, err)
}

// reboot prefers an off/on pair whose every step shows in PowerState (a
// restart can finish between two polls and be invisible); ForceRestart and
// PowerCycle serve BMCs without it.
func (d *redfishDriver) reboot(c *rfCall, s *rfSystem, soft bool) error {
	_, canOn := pickReset(s, redfish.OnResetType, redfish.ForceOnResetType)
	if soft {
		if _, ok := pickReset(s, redfish.GracefulShutdownResetType); ok && canOn {
			if err := d.softOff(c, s); err != nil {
				return err
			}
			return d.powerOn(c, s)
		}
		if rt, ok := pickReset(s, redfish.GracefulRestartResetType); ok {
			if err := d.reset(s, rt); err != nil {
				return err
			}
			return d.waitPower(c, redfish.OnPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
		}
		d.log.Warn("soft reboot: no graceful reset offered, rebooting hard", "allowed", s.SupportedResetTypes)
	}
	if _, ok := pickReset(s, redfish.ForceOffResetType); ok && canOn {
		if err := d.forceOff(c, s); err != nil {
			return err
		}
		return d.powerOn(c, s)
	}
	rt, ok := pickReset(s, redfish.ForceRestartResetType, redfish.PowerCycleResetType, redfish.GracefulRestartResetType)
	if !ok {
		return fmt.Errorf("%w: no reboot reset type among %v", ErrUnsupported, s.SupportedResetTypes)
	}
	if err := d.reset(s, rt); err != nil {
		return err
	}
	return d.waitPower(c, redfish.OnPowerState, powerTimeout(c.ctx, d.cfg.power.stateTimeout))
}

// waitPower polls PowerState until it reads want. Read errors while waiting
// are tolerated until the deadline: BMCs often stall during a power change.
func (d *redfishDriver) waitPower(c *rfCall, want redfish.PowerState, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(d.cfg.power.pollInterval)
	defer tick.Stop()
	var last redfish.PowerState
	var lastErr error
	for {
		s, err := d.system(c)
		if err == nil {
			if s.PowerState == want {
				return nil
			}
			last, lastErr = s.PowerState, nil
		} else {
			if errors.Is(err, ErrAuth) || errors.Is(err, ErrInvalidConfig) {
				return err
			}
			lastErr = err
		}
		if !time.Now().Before(deadline) {
			if lastErr != nil {
				return fmt.Errorf("%w: timed out after %s waiting for power state %s: %w", ErrBusy, timeout, want, lastErr)
			}
			return fmt.Errorf("%w: timed out after %s waiting for power state %s: still %q", ErrBusy, timeout, want, last)
		}
		select {
		case <-c.ctx.Done():
			return fmt.Errorf("%w: waiting for power state %s: %w", ErrUnreachable, want, c.ctx.Err())
		case <-tick.C:
		}
	}
}

var bootTargets = map[BootDevice]redfish.BootSourceOverrideTarget{
	BootPXE:   redfish.PxeBootSourceOverrideTarget,
	BootDisk:  redfish.HddBootSourceOverrideTarget,
	BootCDROM: redfish.CdBootSourceOverrideTarget,
	BootBIOS:  redfish.BiosSetupBootSourceOverrideTarget,
	// UefiHttp with Boot.HttpBootUri (Ironic's redfish management for
	// boot device uefihttp, the redfish-https boot interface).
	BootUefiHTTP: redfish.UefiHTTPBootSourceOverrideTarget,
}

func (d *redfishDriver) SetBootDevice(ctx context.Context, bs BootSetting) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	if err := d.setBoot(c, bs); err != nil {
		return fmt.Errorf("set boot device %s via redfish %s: %w", bs.Device, d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) setBoot(c *rfCall, bs BootSetting) error {
	target, ok := bootTargets[bs.Device]
	if !ok {
		return fmt.Errorf("%w: boot device %q", ErrUnsupported, bs.Device)
	}
	s, err := d.system(c)
	if err != nil {
		return err
	}
	if len(s.bootTargets) > 0 && !slices.Contains(s.bootTargets, string(target)) {
		return fmt.Errorf("%w: BootSourceOverrideTarget %s not among %v", ErrUnsupported, target, s.bootTargets)
	}
	want := redfish.Boot{BootSourceOverrideTarget: target, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}
	if bs.Device == BootUefiHTTP {
		want.HTTPBootURI = bs.HTTPBootURI
	}
	if bs.Persistent {
		want.BootSourceOverrideEnabled = redfish.ContinuousBootSourceOverrideEnabled
	}
	switch bs.Mode {
	case BootModeUEFI:
		want.BootSourceOverrideMode = redfish.UEFIBootSourceOverrideMode
	case BootModeBIOS:
		want.BootSourceOverrideMode = redfish.LegacyBootSourceOverrideMode
	case "":
	default:
		return fmt.Errorf("%w: boot mode %q", ErrUnsupported, bs.Mode)
	}
	if err := s.SetBoot(want); err != nil {
		return fmt.Errorf("PATCH Boot %s/%s/%s: %w", want.BootSourceOverrideTarget, want.BootSourceOverrideEnabled, want.BootSourceOverrideMode, err)
	}
	// Read back: some BMCs keep only part of what they accepted.
	got, err := d.system(c)
	if err != nil {
		return fmt.Errorf("read back boot override: %w", err)
	}
	b := got.Boot
	if b.BootSourceOverrideTarget != target {
		return fmt.Errorf("%w: BMC accepted boot override %s but reads back %q", ErrBusy, target, b.BootSourceOverrideTarget)
	}
	if want.HTTPBootURI != "" && b.HTTPBootURI != want.HTTPBootURI {
		return fmt.Errorf("%w: BMC accepted HttpBootUri %s but reads back %q", ErrBusy, want.HTTPBootURI, b.HTTPBootURI)
	}
	if !bs.Persistent && b.BootSourceOverrideEnabled == redfish.ContinuousBootSourceOverrideEnabled {
		d.log.Warn("BMC turned a one-time boot override into a persistent one; treating it as persistent",
			"device", bs.Device, "target", target)
	}
	if want.BootSourceOverrideMode != "" && b.BootSourceOverrideMode != "" && b.BootSourceOverrideMode != want.BootSourceOverrideMode {
		d.log.Warn("BMC kept another boot mode than asked", "asked", want.BootSourceOverrideMode, "kept", b.BootSourceOverrideMode)
	}
	return nil
}

func (d *redfishDriver) GetBootDevice(ctx context.Context) (BootSetting, error) {
	c, err := d.call(ctx)
	if err != nil {
		return BootSetting{}, err
	}
	s, err := d.system(c)
	if err != nil {
		return BootSetting{}, fmt.Errorf("get boot device via redfish %s: %w", d.cfg.endpoint, err)
	}
	b := s.Boot
	var out BootSetting
	if b.BootSourceOverrideEnabled != redfish.DisabledBootSourceOverrideEnabled {
		for dev, t := range bootTargets {
			if t == b.BootSourceOverrideTarget {
				out.Device = dev
			}
		}
	}
	out.Persistent = b.BootSourceOverrideEnabled == redfish.ContinuousBootSourceOverrideEnabled
	switch b.BootSourceOverrideMode {
	case redfish.UEFIBootSourceOverrideMode:
		out.Mode = BootModeUEFI
	case redfish.LegacyBootSourceOverrideMode:
		out.Mode = BootModeBIOS
	}
	return out, nil
}

func (d *redfishDriver) SupportedBootDevices(ctx context.Context) ([]BootDevice, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	s, err := d.system(c)
	if err != nil {
		return nil, fmt.Errorf("get supported boot devices via redfish %s: %w", d.cfg.endpoint, err)
	}
	var out []BootDevice
	for _, dev := range []BootDevice{BootPXE, BootDisk, BootCDROM, BootBIOS} {
		if len(s.bootTargets) == 0 || slices.Contains(s.bootTargets, string(bootTargets[dev])) {
			out = append(out, dev)
		}
	}
	return out, nil
}

// mediaCollections are the VirtualMedia collections the system's managers
// link, then the system's own (where some BMCs keep them, sushy bug
// 2039458), each once. A manager that cannot be read is skipped.
func (d *redfishDriver) mediaCollections(c *rfCall) ([]string, error) {
	s, err := d.system(c)
	if err != nil {
		return nil, err
	}
	var collections []string
	for _, m := range s.managedBy {
		var mgr struct{ VirtualMedia common.Link }
		if err := getJSON(c, m, &mgr); err != nil {
			d.log.Warn("cannot read manager while looking for virtual media", "manager", m, "error", err)
			continue
		}
		if l := mgr.VirtualMedia.String(); l != "" && !slices.Contains(collections, l) {
			collections = append(collections, l)
		}
	}
	if s.virtualMedia != "" && !slices.Contains(collections, s.virtualMedia) {
		collections = append(collections, s.virtualMedia)
	}
	return collections, nil
}

// findCD follows VirtualMedia links from the system's managers and from the
// system itself (where some BMCs keep them, sushy bug 2039458) and returns
// the first device that takes a CD or DVD. Paths are never built: firmware
// updates move them.
func (d *redfishDriver) findCD(c *rfCall) (*redfish.VirtualMedia, error) {
	collections, err := d.mediaCollections(c)
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, col := range collections {
		members, err := collectionMembers(c, col)
		if err != nil {
			if errors.Is(err, ErrUnsupported) { // 404: a link to nowhere
				d.log.Warn("virtual media collection not readable", "collection", col, "error", err)
				continue
			}
			return nil, fmt.Errorf("list virtual media %s: %w", col, err)
		}
		for _, m := range members {
			vm, err := redfish.GetVirtualMedia(c, m)
			if err != nil {
				return nil, fmt.Errorf("read virtual media %s: %w", m, err)
			}
			seen = append(seen, fmt.Sprintf("%s%v", m, vm.MediaTypes))
			if slices.Contains(vm.MediaTypes, redfish.CDMediaType) || slices.Contains(vm.MediaTypes, redfish.DVDMediaType) {
				return vm, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: no virtual media device takes a CD or DVD (collections %v, devices %v)", ErrUnsupported, collections, seen)
}

func (d *redfishDriver) InsertMedia(ctx context.Context, imageURL string) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	if err := d.insertMedia(c, imageURL); err != nil {
		return fmt.Errorf("insert virtual media %s via redfish %s: %w", imageURL, d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) insertMedia(c *rfCall, imageURL string) error {
	vm, err := d.findCD(c)
	if err != nil {
		return err
	}
	ejected := false
	if vm.Inserted {
		if vm.Image == imageURL && vm.WriteProtected {
			d.log.Info("virtual media already holds the image", "device", vm.ODataID)
			return nil
		}
		if err := d.eject(vm); err != nil {
			return fmt.Errorf("eject %q first: %w", vm.Image, err)
		}
		ejected = true
	}
	for attempt := 1; ; attempt++ {
		if ejected {
			// An eject can remove the device or change its document; look
			// it up again rather than reusing the old one.
			if vm, err = d.findCD(c); err != nil {
				return err
			}
		}
		err = d.insert(vm, imageURL)
		if err == nil {
			break
		}
		if !ejected || attempt >= DefaultMediaInsertAttempts || errors.Is(err, ErrAuth) || c.ctx.Err() != nil {
			return err
		}
		d.log.Info("insert right after eject failed, retrying", "device", vm.ODataID, "attempt", attempt, "error", err)
		t := time.NewTimer(d.cfg.retryInterval)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	got, err := redfish.GetVirtualMedia(c, vm.ODataID)
	if err != nil {
		return fmt.Errorf("read back %s: %w", vm.ODataID, err)
	}
	if !got.Inserted || got.Image != imageURL {
		return fmt.Errorf("%w: BMC accepted the insert but %s reads back Inserted=%v Image=%q", ErrBusy, vm.ODataID, got.Inserted, got.Image)
	}
	return nil
}

// insert uses the InsertMedia action and falls back to PATCH of the device
// for services that offer no action (older DMTF schema, some OpenBMC builds).
func (d *redfishDriver) insert(vm *redfish.VirtualMedia, imageURL string) error {
	d.log.Info("inserting virtual media", "device", vm.ODataID, "image", imageURL)
	if vm.SupportsMediaInsert {
		return vm.InsertMedia(imageURL, true, true)
	}
	return vm.Patch(vm.ODataID, map[string]any{"Image": imageURL, "Inserted": true, "WriteProtected": true})
}

func (d *redfishDriver) eject(vm *redfish.VirtualMedia) error {
	d.log.Info("ejecting virtual media", "device", vm.ODataID, "image", vm.Image)
	if vm.SupportsMediaEject {
		return vm.EjectMedia()
	}
	return vm.Patch(vm.ODataID, map[string]any{"Image": nil, "Inserted": false})
}

func (d *redfishDriver) EjectMedia(ctx context.Context) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	vm, err := d.findCD(c)
	if err != nil {
		return fmt.Errorf("eject virtual media via redfish %s: %w", d.cfg.endpoint, err)
	}
	if !vm.Inserted {
		return nil
	}
	if err := d.eject(vm); err != nil {
		return fmt.Errorf("eject virtual media %s via redfish %s: %w", vm.ODataID, d.cfg.endpoint, err)
	}
	return nil
}
