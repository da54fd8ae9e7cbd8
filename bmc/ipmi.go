package bmc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"
)

// IPMI driver defaults. Cipher suite 3 is pinned rather than negotiated:
// some BMCs (and ipmi_sim) never answer Get Channel Cipher Suites and
// negotiation stalls for seconds. A lost UDP datagram is retried after a
// short timeout instead of waiting long for it.
const (
	DefaultIPMIPort        = 623
	DefaultIPMICipherSuite = 3
	DefaultIPMIPrivLevel   = "ADMINISTRATOR"
	DefaultIPMITimeout     = 2 * time.Second // one UDP exchange
	DefaultIPMIRetries     = 3               // further tries of an exchange whose answer was lost
)

func init() { Register("ipmi", newIPMI) }

type ipmiConfig struct {
	host        string
	port        int
	username    string
	password    string
	cipherSuite int
	priv        types.PrivilegeLevel
	privName    string
	timeout     time.Duration
	retries     int
	power       powerTiming
}

func (c *ipmiConfig) addr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

var ipmiPrivLevels = map[string]types.PrivilegeLevel{
	"CALLBACK":      types.PrivilegeLevelCallback,
	"USER":          types.PrivilegeLevelUser,
	"OPERATOR":      types.PrivilegeLevelOperator,
	"ADMINISTRATOR": types.PrivilegeLevelAdministrator,
}

func parseIPMIConfig(info map[string]any) (*ipmiConfig, error) {
	if missing, _ := MissingKeys("ipmi", info); len(missing) > 0 {
		return nil, missingError("IPMI", missing)
	}
	cfg := &ipmiConfig{}
	cfg.host, _ = infoString(info, "ipmi_address")
	cfg.host = strings.TrimSuffix(strings.TrimPrefix(cfg.host, "["), "]")
	var err error
	if cfg.port, err = infoInt(info, "ipmi_port", DefaultIPMIPort, 1, 65535); err != nil {
		return nil, err
	}
	cfg.username, _ = infoString(info, "ipmi_username")
	if len(cfg.username) > 16 {
		return nil, fmt.Errorf("%w: ipmi_username is longer than IPMI's 16 characters", ErrInvalidConfig)
	}
	if p, ok := info["ipmi_password"]; ok && p != nil {
		cfg.password = fmt.Sprint(p)
	}
	if len(cfg.password) > 20 {
		return nil, fmt.Errorf("%w: ipmi_password is longer than IPMI 2.0's 20 characters", ErrInvalidConfig)
	}
	if cfg.cipherSuite, err = infoInt(info, "ipmi_cipher_suite", DefaultIPMICipherSuite, 0, 17); err != nil {
		return nil, err
	}
	cfg.privName = DefaultIPMIPrivLevel
	if s, ok := infoString(info, "ipmi_priv_level"); ok && s != "" {
		cfg.privName = strings.ToUpper(s)
	}
	var ok bool
	if cfg.priv, ok = ipmiPrivLevels[cfg.privName]; !ok {
		return nil, fmt.Errorf("%w: ipmi_priv_level %q is not one of ADMINISTRATOR, OPERATOR, USER, CALLBACK", ErrInvalidConfig, cfg.privName)
	}
	if cfg.timeout, err = infoDuration(info, "ipmi_timeout", DefaultIPMITimeout); err != nil {
		return nil, err
	}
	if cfg.retries, err = infoInt(info, "ipmi_retries", DefaultIPMIRetries, 0, 20); err != nil {
		return nil, err
	}
	if cfg.power, err = parsePowerTiming(info); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ipmiLocks serializes calls to one BMC across the process: BMCs have a
// handful of session slots and answer one request at a time, and
// concurrent sessions from one conductor are what exhausts them
// ("Insufficient resources to create a session").
var ipmiLocks sync.Map // host:port -> chan struct{} (capacity 1)

func lockIPMI(ctx context.Context, addr string) (func(), error) {
	v, _ := ipmiLocks.LoadOrStore(addr, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for another call to IPMI BMC %s: %w", ErrBusy, addr, ctx.Err())
	}
}

// ipmiDriver opens a session per operation and closes it at the end (no
// pooling): a session left open between activity calls is one the BMC may
// lack for the next caller, and opening one with a pinned cipher suite takes
// four round trips.
type ipmiDriver struct {
	cfg *ipmiConfig
	log *slog.Logger
}

func newIPMI(info map[string]any) (Driver, error) {
	cfg, err := parseIPMIConfig(info)
	if err != nil {
		return nil, err
	}
	return &ipmiDriver{cfg: cfg, log: slog.Default().With("bmc", cfg.addr(), "driver", "ipmi")}, nil
}

func (d *ipmiDriver) Close() error { return nil }

// session runs fn inside one lanplus session, holding the BMC's lock.
func (d *ipmiDriver) session(ctx context.Context, what string, fn func(c *client.Client) error) error {
	start := time.Now()
	err := d.sessionOnce(ctx, what, fn)
	observe("ipmi", what, start, err)
	return err
}

// sessionOnce is session without the measure.
func (d *ipmiDriver) sessionOnce(ctx context.Context, what string, fn func(c *client.Client) error) error {
	unlock, err := lockIPMI(ctx, d.cfg.addr())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()

	c, err := client.NewClient(d.cfg.host, d.cfg.port, d.cfg.username, d.cfg.password)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, what, err)
	}
	c.WithInterface(client.InterfaceLanplus).
		WithTimeout(d.cfg.timeout).
		WithRetry(d.cfg.retries).
		WithCipherSuiteID(types.CipherSuiteID(d.cfg.cipherSuite)).
		WithMaxPrivilegeLevel(d.cfg.priv)
	if err := c.Connect(ctx); err != nil {
		// No session to close: a cancelled context makes Close skip the
		// Close Session exchange and only release the UDP socket.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Close(done)
		return d.mapErr(ctx, what+": open session", err, true)
	}
	defer func() {
		// The BMC keeps a session that is not closed until it times out;
		// close it even when the caller's context has ended, bounded by one
		// exchange.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.timeout)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			d.log.Warn("closing IPMI session failed", "error", err)
		}
	}()
	if err := fn(c); err != nil {
		return d.mapErr(ctx, what, err, false)
	}
	return nil
}

// mapErr turns go-ipmi's errors into the driver's typed errors.
func (d *ipmiDriver) mapErr(ctx context.Context, what string, err error, connecting bool) error {
	if isTyped(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var re *types.ResponseError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s on %s: %w", ErrUnreachable, what, d.cfg.addr(), ctx.Err())
	case errors.As(err, &re):
		switch re.CompletionCode() {
		case types.CodeInvalidCommand, types.CodeRequestDataFieldInvalid, types.CodeParameterOutOfRange,
			types.CodeNotSupported, types.CodeIllegalCommand, types.CodeParameterNotSupported:
			return fmt.Errorf("%w: %s on %s: %v", ErrUnsupported, what, d.cfg.addr(), err)
		case types.CodeInsufficientPrivilege:
			return fmt.Errorf("%w: %s on %s: privilege level %s is not enough: %v", ErrAuth, what, d.cfg.addr(), d.cfg.privName, err)
		}
		return fmt.Errorf("%w: %s on %s: %v", ErrBusy, what, d.cfg.addr(), err)
	case errors.Is(err, client.ErrRAKPAuthentication):
		return fmt.Errorf("%w: %s on %s as %q: authentication failed: %v", ErrAuth, what, d.cfg.addr(), d.cfg.username, err)
	case isTimeout(err):
		return fmt.Errorf("%w: %s on %s: no answer within %s × %d tries: %v", ErrUnreachable, what, d.cfg.addr(), d.cfg.timeout, d.cfg.retries+1, err)
	}
	msg := strings.TrimSpace(err.Error())
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "connection refused"):
		return fmt.Errorf("%w: %s on %s: nothing listens (ICMP port unreachable): %v", ErrUnreachable, what, d.cfg.addr(), err)
	case strings.Contains(lower, "insufficient resources") || strings.Contains(lower, "no free session") || strings.Contains(lower, "busy"):
		return fmt.Errorf("%w: %s on %s: %v", ErrBusy, what, d.cfg.addr(), err)
	case connecting && authFailure(lower):
		// go-ipmi returns these as plain text, sometimes empty; the caller
		// needs to know that only new credentials will help.
		return fmt.Errorf("%w: %s on %s as %q: authentication failed (%s)", ErrAuth, what, d.cfg.addr(), d.cfg.username, msg)
	}
	return fmt.Errorf("%w: %s on %s: %v", ErrBusy, what, d.cfg.addr(), err)
}

// authFailure recognizes go-ipmi's texts for a refused login: a RAKP 2
// code mismatch (wrong password), RMCP+ status 0x0d (unknown user), 0x09
// (privilege level not permitted), or nothing at all.
func authFailure(lower string) bool {
	if lower == "" || strings.HasSuffix(lower, "err:") {
		return true
	}
	for _, s := range []string{"rakp authentication failed", "unauthorized name", "status 0x0d", "status 0x09", "unauthorized role", "invalid name length"} {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

func isTyped(err error) bool {
	for _, e := range []error{ErrUnreachable, ErrAuth, ErrUnsupported, ErrBusy, ErrInvalidConfig, ErrSoftPowerOffTimeout} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// go-ipmi reports a lost answer as text ("no datagram matched before
	// deadline"), not as a net.Error.
	lower := strings.ToLower(err.Error())
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		strings.Contains(lower, "timeout") || strings.Contains(lower, "deadline")
}

func (d *ipmiDriver) Validate(ctx context.Context) error {
	return d.session(ctx, "validate IPMI BMC", func(c *client.Client) error {
		_, err := c.GetChassisStatus(ctx)
		return err
	})
}

func (d *ipmiDriver) PowerState(ctx context.Context) (PowerState, error) {
	var ps PowerState
	err := d.session(ctx, "get power state", func(c *client.Client) error {
		var err error
		ps, err = readPower(ctx, c)
		return err
	})
	return ps, err
}

func readPower(ctx context.Context, c *client.Client) (PowerState, error) {
	st, err := c.GetChassisStatus(ctx)
	if err != nil {
		return PowerUnknown, err
	}
	if st.PowerIsOn {
		return PowerOn, nil
	}
	return PowerOff, nil
}

// SetPower reads the state first so that every action is idempotent: a
// power on of a node that is on does nothing (never a cycle-on-if-off, MAAS
// LP #1730089), and a reboot of a node that is off only powers it on.
func (d *ipmiDriver) SetPower(ctx context.Context, action PowerAction) error {
	return d.session(ctx, string(action), func(c *client.Client) error {
		cur, err := readPower(ctx, c)
		if err != nil {
			return err
		}
		switch action {
		case ActionPowerOn:
			if cur == PowerOn {
				d.log.Info("power on: already on, nothing to do")
				return nil
			}
			return d.control(ctx, c, chassis.ChassisControlPowerUp, PowerOn, powerTimeout(ctx, d.cfg.power.stateTimeout))
		case ActionPowerOff:
			if cur == PowerOff {
				d.log.Info("power off: already off, nothing to do")
				return nil
			}
			return d.control(ctx, c, chassis.ChassisControlPowerDown, PowerOff, powerTimeout(ctx, d.cfg.power.stateTimeout))
		case ActionSoftOff:
			if cur == PowerOff {
				d.log.Info("soft power off: already off, nothing to do")
				return nil
			}
			return d.softOff(ctx, c)
		case ActionReset:
			if cur == PowerOff {
				return d.control(ctx, c, chassis.ChassisControlPowerUp, PowerOn, powerTimeout(ctx, d.cfg.power.stateTimeout))
			}
			// The power stays on through a hard reset: the wait only
			// confirms it.
			return d.control(ctx, c, chassis.ChassisControlHardReset, PowerOn, powerTimeout(ctx, d.cfg.power.stateTimeout))
		case ActionReboot, ActionSoftReboot:
			if cur == PowerOff {
				d.log.Info("reboot of a node that is off: powering it on")
			} else {
				// Off, then on, each verified: a cycle can finish between two
				// status reads and prove nothing.
				var err error
				if action == ActionSoftReboot {
					err = d.softOff(ctx, c)
				} else {
					err = d.control(ctx, c, chassis.ChassisControlPowerDown, PowerOff, powerTimeout(ctx, d.cfg.power.stateTimeout))
				}
				if err != nil {
					return err
				}
			}
			return d.control(ctx, c, chassis.ChassisControlPowerUp, PowerOn, powerTimeout(ctx, d.cfg.power.stateTimeout))
		}
		return fmt.Errorf("%w: power action %q", ErrUnsupported, action)
	})
}

// softOff asks the OS to shut down (ACPI) and waits for the power to go
// off. A machine still on at the deadline fails the call and keeps its
// power, as Ironic's ipmitool soft power off (PowerStateFailure): the
// caller decides whether to cut it.
func (d *ipmiDriver) softOff(ctx context.Context, c *client.Client) error {
	timeout := powerTimeout(ctx, d.cfg.power.softOffTimeout)
	err := d.control(ctx, c, chassis.ChassisControlSoftShutdown, PowerOff, timeout)
	if err == nil || !errors.Is(err, ErrBusy) || ctx.Err() != nil {
		return err
	}
	d.log.Warn("soft power off did not power the node off in time", "timeout", timeout, "error", err)
	return fmt.Errorf("%w (%v)", ErrSoftPowerOffTimeout, err)
}

// control sends a chassis control command and polls Get Chassis Status
// until the power state reads want.
func (d *ipmiDriver) control(ctx context.Context, c *client.Client, cmd chassis.ChassisControl, want PowerState, timeout time.Duration) error {
	d.log.Info("IPMI chassis control", "command", controlName(cmd), "want", want)
	if _, err := c.ChassisControl(ctx, cmd); err != nil {
		return d.mapErr(ctx, "chassis control "+controlName(cmd), err, false)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(d.cfg.power.pollInterval)
	defer tick.Stop()
	var last PowerState
	var lastErr error
	for {
		ps, err := readPower(ctx, c)
		if err == nil && ps == want {
			return nil
		}
		last, lastErr = ps, err
		if !time.Now().Before(deadline) {
			if lastErr != nil {
				return fmt.Errorf("%w: timed out after %s waiting for %s after %s: %v", ErrBusy, timeout, want, controlName(cmd), lastErr)
			}
			return fmt.Errorf("%w: timed out after %s waiting for %s after %s: still %q", ErrBusy, timeout, want, controlName(cmd), last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for %s: %w", ErrUnreachable, want, ctx.Err())
		case <-tick.C:
		}
	}
}

func controlName(c chassis.ChassisControl) string {
	switch c {
	case chassis.ChassisControlPowerDown:
		return "power down"
	case chassis.ChassisControlPowerUp:
		return "power up"
	case chassis.ChassisControlPowerCycle:
		return "power cycle"
	case chassis.ChassisControlHardReset:
		return "hard reset"
	case chassis.ChassisControlSoftShutdown:
		return "soft shutdown"
	}
	return fmt.Sprintf("control %d", c)
}

var ipmiBootDevices = map[BootDevice]types.BootDeviceSelector{
	BootPXE:   types.BootDeviceSelectorForcePXE,
	BootDisk:  types.BootDeviceSelectorForceHardDrive,
	BootCDROM: types.BootDeviceSelectorForceCDROM,
	BootBIOS:  types.BootDeviceSelectorForceBIOSSetup,
}

// SetBootDevice uses the plain set-boot-device path (parameter 5 alone):
// parameters 0 (set in progress) and 3 answer 0xcc on some BMCs, which
// makes the generic boot-flags setter fail where this works.
func (d *ipmiDriver) SetBootDevice(ctx context.Context, bs BootSetting) error {
	sel, ok := ipmiBootDevices[bs.Device]
	if !ok {
		return fmt.Errorf("set boot device: %w: boot device %q", ErrUnsupported, bs.Device)
	}
	var bootType types.BIOSBootType
	switch bs.Mode {
	case BootModeUEFI:
		bootType = types.BIOSBootTypeEFI
	case BootModeBIOS, "":
		bootType = types.BIOSBootTypeLegacy
	default:
		return fmt.Errorf("set boot device: %w: boot mode %q", ErrUnsupported, bs.Mode)
	}
	return d.session(ctx, "set boot device "+string(bs.Device), func(c *client.Client) error {
		if err := c.SetBootDevice(ctx, sel, bootType, bs.Persistent); err != nil {
			return err
		}
		got, err := readBoot(ctx, c)
		if err != nil {
			d.log.Warn("cannot read the boot device back", "error", err)
			return nil
		}
		if got.Device != bs.Device {
			return fmt.Errorf("%w: BMC accepted boot device %s but reads back %q", ErrBusy, bs.Device, got.Device)
		}
		if got.Persistent != bs.Persistent || (bs.Mode == BootModeUEFI) != (got.Mode == BootModeUEFI) {
			// ipmi_sim and some BMCs keep only the device.
			d.log.Warn("BMC kept the boot device but not all its flags",
				"device", got.Device, "persistent_asked", bs.Persistent, "persistent_kept", got.Persistent,
				"mode_asked", bs.Mode, "mode_kept", got.Mode)
		}
		return nil
	})
}

func readBoot(ctx context.Context, c *client.Client) (BootSetting, error) {
	flags := &types.BootOptionParam_BootFlags{}
	if err := c.GetSystemBootOptionsParamFor(ctx, flags); err != nil {
		return BootSetting{}, err
	}
	var bs BootSetting
	for dev, sel := range ipmiBootDevices {
		if sel == flags.BootDeviceSelector {
			bs.Device = dev
		}
	}
	bs.Persistent = flags.Persist
	if flags.BIOSBootType == types.BIOSBootTypeEFI {
		bs.Mode = BootModeUEFI
	} else {
		bs.Mode = BootModeBIOS
	}
	return bs, nil
}

func (d *ipmiDriver) GetBootDevice(ctx context.Context) (BootSetting, error) {
	var bs BootSetting
	err := d.session(ctx, "get boot device", func(c *client.Client) error {
		var err error
		bs, err = readBoot(ctx, c)
		return err
	})
	return bs, err
}

func (d *ipmiDriver) SupportedBootDevices(context.Context) ([]BootDevice, error) {
	return []BootDevice{BootPXE, BootDisk, BootCDROM, BootBIOS}, nil
}

func (d *ipmiDriver) InsertMedia(context.Context, string) error {
	return fmt.Errorf("insert virtual media over IPMI: %w: IPMI has no virtual media; use the redfish driver", ErrUnsupported)
}

func (d *ipmiDriver) EjectMedia(context.Context) error {
	return fmt.Errorf("eject virtual media over IPMI: %w: IPMI has no virtual media; use the redfish driver", ErrUnsupported)
}
