// Package bmc owns out-of-band control of a machine through its baseboard
// management controller: power, boot device and virtual media. It defines the
// Driver interface that activities call and the drivers behind it (redfish,
// ipmi, and a fake one for unit tests and scale benchmarks). It never touches
// the store or Temporal: callers hand it a node's driver_info and get typed
// errors back that say whether a retry can help.
package bmc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PowerState is Ironic's power state vocabulary.
type PowerState string

const (
	PowerOn  PowerState = "power on"
	PowerOff PowerState = "power off"
	// PowerUnknown is returned when the BMC answered but the state is neither.
	PowerUnknown PowerState = ""
)

// PowerAction is a requested change, named as Ironic's power targets.
type PowerAction string

const (
	ActionPowerOn    PowerAction = "power on"
	ActionPowerOff   PowerAction = "power off"
	ActionSoftOff    PowerAction = "soft power off"
	ActionReboot     PowerAction = "rebooting"
	ActionSoftReboot PowerAction = "soft rebooting"
	// ActionReset reboots a machine that is on without powering it off
	// (IPMI chassis hard reset, Redfish ForceRestart), and powers on one
	// that is off: Ironic's reboot of a node with disable_power_off.
	ActionReset PowerAction = "reset"
)

type powerTimeoutKey struct{}

// WithPowerTimeout bounds each power state wait of the power calls made
// with ctx, instead of the node's power_state_change_timeout and
// soft_power_off_timeout: the timeout of Ironic's power API (API 1.27),
// which its drivers apply to every wait, once for the power off and once
// for the power on of a reboot.
func WithPowerTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, powerTimeoutKey{}, d)
}

// powerTimeout is the wait the caller asked for (WithPowerTimeout), else def.
func powerTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Value(powerTimeoutKey{}).(time.Duration); ok {
		return d
	}
	return def
}

// BootDevice is Ironic's boot device vocabulary.
type BootDevice string

const (
	BootPXE   BootDevice = "pxe"
	BootDisk  BootDevice = "disk"
	BootCDROM BootDevice = "cdrom"
	BootBIOS  BootDevice = "bios"
	// BootUefiHTTP is the firmware's UEFI HTTP boot, of the setting's
	// HTTPBootURI (Redfish UefiHttp with Boot.HttpBootUri).
	BootUefiHTTP BootDevice = "uefihttp"
)

// BootMode is the firmware mode a boot override asks for.
type BootMode string

const (
	BootModeUEFI BootMode = "uefi"
	BootModeBIOS BootMode = "bios"
)

// BootSetting is what SetBootDevice asks for and GetBootDevice reads back.
// Persistent false means "next boot only" (Redfish Once, IPMI no persistent flag).
type BootSetting struct {
	Device     BootDevice `json:"boot_device"`
	Persistent bool       `json:"persistent"`
	Mode       BootMode   `json:"boot_mode,omitempty"`
	// HTTPBootURI is what a uefihttp boot fetches ("": the URL DHCP gives).
	HTTPBootURI string `json:"http_boot_uri,omitempty"`
}

// Driver is one node's BMC. Implementations bound every call by the context
// and by their own per-call timeout, and return errors wrapping one of the
// sentinel errors below so that callers can decide whether to retry.
type Driver interface {
	// Validate checks that driver_info is complete and that the BMC answers
	// with these credentials.
	Validate(ctx context.Context) error
	PowerState(ctx context.Context) (PowerState, error)
	// SetPower performs the action and returns once the BMC reports the
	// resulting state (or the action's deadline passed).
	SetPower(ctx context.Context, action PowerAction) error
	SetBootDevice(ctx context.Context, s BootSetting) error
	GetBootDevice(ctx context.Context) (BootSetting, error)
	SupportedBootDevices(ctx context.Context) ([]BootDevice, error)
	// InsertMedia attaches the image at url as a virtual CD, ejecting what
	// was there first. EjectMedia is idempotent.
	InsertMedia(ctx context.Context, url string) error
	EjectMedia(ctx context.Context) error
	// Close releases sessions held for this BMC.
	Close() error
}

// Typed failures. Drivers wrap them: fmt.Errorf("%w: ...", ErrUnreachable).
var (
	// ErrUnreachable: no answer within the timeout (network, BMC down). Retryable.
	ErrUnreachable = errors.New("BMC unreachable")
	// ErrAuth: the BMC rejected the credentials. Not retryable until an operator fixes driver_info.
	ErrAuth = errors.New("BMC authentication failed")
	// ErrUnsupported: the BMC cannot do this (no virtual media, unknown boot device). Not retryable.
	ErrUnsupported = errors.New("not supported by this BMC")
	// ErrBusy: the BMC answered but is busy or failed transiently (5xx, session exhaustion). Retryable.
	ErrBusy = errors.New("BMC busy")
	// ErrSoftPowerOffTimeout: a soft power off (or a soft reboot's power
	// off) asked the OS to shut down and the machine was still on at the
	// deadline. Not retryable: the power was left alone, and the caller may
	// fall back to a hard power off, as Ironic's clients do.
	ErrSoftPowerOffTimeout = errors.New("Failed to set node power state to power off.")
	// ErrInvalidConfig: driver_info is missing or malformed keys. Not retryable.
	ErrInvalidConfig = errors.New("invalid driver_info")
)

// Retryable reports whether a later attempt of the same call can succeed
// without an operator changing anything.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrBusy)
}

// Factory builds a Driver from a node's driver_info.
type Factory func(driverInfo map[string]any) (Driver, error)

var factories = map[string]Factory{}

// Register makes a hardware type (Ironic's driver name: "ipmi", "redfish",
// "fake-hardware") available to New. Drivers call it from init.
func Register(name string, f Factory) { factories[name] = f }

// New returns the driver for a node's hardware type and driver_info.
func New(driver string, driverInfo map[string]any) (Driver, error) {
	f, ok := factories[driver]
	if !ok {
		return nil, fmt.Errorf("%w: no BMC driver for hardware type %q", ErrInvalidConfig, driver)
	}
	return f(driverInfo)
}

// Firmware is a driver that updates the machine's firmware through the BMC
// (bmc/redfish_firmware.go). Callers assert it on a Driver; a driver
// without it cannot update firmware.
type Firmware interface {
	// FirmwareComponents reads the versions of the components an update
	// can name: "bios", "bmc" and "nic:<adapter id>" (Ironic's names).
	FirmwareComponents(ctx context.Context) ([]FirmwareComponent, error)
	// StartFirmwareUpdate asks the BMC to apply the image and returns the
	// task to watch; a BMC that applied it before answering returns a
	// task that is already Done.
	StartFirmwareUpdate(ctx context.Context, u FirmwareUpdate) (FirmwareTask, error)
	// FirmwareTaskStatus reads the task once.
	FirmwareTaskStatus(ctx context.Context, taskURI string) (FirmwareTaskStatus, error)
}

// FirmwareComponent is one component's version as the BMC reports it.
type FirmwareComponent struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	// Vendor, Model and SerialNumber identify the component's hardware
	// where the BMC says (Ironic's API 1.114): a network adapter's
	// Manufacturer, Model and SerialNumber, the manager's Model.
	Vendor       string `json:"vendor,omitempty"`
	Model        string `json:"model,omitempty"`
	SerialNumber string `json:"serial_number,omitempty"`
}

// FirmwareUpdate is one image to apply.
type FirmwareUpdate struct {
	Component string `json:"component"`
	URL       string `json:"url"`
}

// FirmwareTask is the BMC's handle on a running update.
type FirmwareTask struct {
	URI  string `json:"uri,omitempty"`
	Done bool   `json:"done,omitempty"`
}

// FirmwareTaskStatus is a task's state (Redfish TaskState), its progress and
// its messages.
type FirmwareTaskStatus struct {
	State    string   `json:"state"`
	Percent  int      `json:"percent,omitempty"`
	Done     bool     `json:"done,omitempty"`
	Failed   bool     `json:"failed,omitempty"`
	Messages []string `json:"messages,omitempty"`
	// ResetRequired: the BMC applies the image at the host's next reset
	// (a message of the Base registry's ResetRequired or the Update
	// registry's AwaitToActivate).
	ResetRequired bool `json:"reset_required,omitempty"`
}
