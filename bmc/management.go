package bmc

import (
	"context"
	"errors"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
)

// Indicator states, Ironic's ironic/common/indicator_states.py words.
const (
	IndicatorOn       = "on"
	IndicatorOff      = "off"
	IndicatorBlinking = "blinking"
	IndicatorUnknown  = "unknown"
)

// Indicator components, Ironic's ironic/common/components.py words.
const (
	ComponentSystem  = "system"
	ComponentChassis = "chassis"
	ComponentDisk    = "disk"
)

// Indicator is one indicator (an LED) of a hardware component as the BMC
// reads it now: Ironic's get_supported_indicators entry (readonly, states)
// and its get_indicator_state answer (State).
type Indicator struct {
	Component string   `json:"component"`
	Name      string   `json:"name"`
	Readonly  bool     `json:"readonly"`
	States    []string `json:"states"`
	State     string   `json:"state"`
}

// NMIInjector is a Driver that pulses the machine's NMI (Ironic's
// ManagementInterface.inject_nmi). A driver that is not one cannot.
type NMIInjector interface {
	InjectNMI(ctx context.Context) error
}

// IndicatorLights is a Driver that reads and sets its components'
// indicators (Ironic's get_supported_indicators, get_indicator_state and
// set_indicator_state).
type IndicatorLights interface {
	Indicators(ctx context.Context) ([]Indicator, error)
	// SetIndicator sets one indicator; ErrUnknownIndicator when the BMC
	// has no such one, ErrIndicatorState when it cannot take state.
	SetIndicator(ctx context.Context, component, name, state string) error
}

var (
	// ErrUnknownIndicator: the component has no indicator of that name.
	ErrUnknownIndicator = errors.New("unknown indicator")
	// ErrIndicatorState: the indicator cannot be set to that state.
	ErrIndicatorState = errors.New("indicator state not supported")
)

// FindIndicator returns the indicator of component named name.
func FindIndicator(all []Indicator, component, name string) (Indicator, bool) {
	for _, in := range all {
		if in.Component == component && in.Name == name {
			return in, true
		}
	}
	return Indicator{}, false
}

// InjectNMI sends Chassis Control "pulse diagnostic interrupt" (IPMI 2.0
// section 28.3, control 04h): ipmitool's `chassis power diag`, which
// Ironic's ipmitool management runs. OpenIPMI's ipmi_sim answers it with
// completion code 0xcc (invalid data field) unless a VM is attached
// through QEMU's ipmi-bmc-extern, so behind ipmi_sim it fails as it
// does for Ironic (docs/api-versions.md).
func (d *ipmiDriver) InjectNMI(ctx context.Context) error {
	return d.session(ctx, "inject NMI", func(c *client.Client) error {
		d.log.Info("IPMI chassis control", "command", "pulse diagnostic interrupt")
		_, err := c.ChassisControl(ctx, chassis.ChassisControlDiagnosticInterrupt)
		return err
	})
}

// fakeIndicators are Ironic's fake management interface's
// (ironic/drivers/modules/fake.py): a read-only chassis LED and a system
// LED, both read as on.
var fakeIndicators = []Indicator{
	{Component: ComponentChassis, Name: "led-0", Readonly: true, States: []string{IndicatorOff, IndicatorOn}, State: IndicatorOn},
	{Component: ComponentSystem, Name: "led", States: []string{IndicatorBlinking, IndicatorOff, IndicatorOn}, State: IndicatorOn},
}

// Indicators are Ironic's fake management interface's.
func (d *fakeDriver) Indicators(ctx context.Context) ([]Indicator, error) {
	if err := d.call(ctx, "read indicators"); err != nil {
		return nil, err
	}
	out := make([]Indicator, len(fakeIndicators))
	for i, in := range fakeIndicators {
		in.States = append([]string(nil), in.States...)
		out[i] = in
	}
	return out, nil
}

// SetIndicator: Ironic's fake management sets none.
func (d *fakeDriver) SetIndicator(ctx context.Context, component, name, state string) error {
	return fmt.Errorf("%w: the fake management interface sets no indicator", ErrUnsupported)
}
