package bmc

import (
	"context"
	"fmt"

	"github.com/stmcginnis/gofish/common"
)

// Health is Ironic's node health vocabulary (API 1.109, Ironic's
// ironic.common.health_states): the machine's overall hardware condition
// as its BMC reports it.
type Health string

const (
	HealthOK       Health = "OK"
	HealthWarning  Health = "Warning"
	HealthCritical Health = "Critical"
	// HealthUnknown: the BMC answered but reported no health, or a value
	// outside the three (Ironic stores None then).
	HealthUnknown Health = ""
)

// HealthReader is a Driver that reads the machine's hardware health, as
// Ironic's management interface get_node_health. A driver without it (IPMI)
// cannot; one that has it returns an error wrapping ErrUnsupported when this
// machine cannot (Ironic's UnsupportedDriverExtension).
type HealthReader interface {
	Health(ctx context.Context) (Health, error)
}

// Health reads the ComputerSystem's Status.Health, the rollup of its
// processors, memory, fans, power supplies and storage that the BMC keeps
// (DMTF's Resource.Status; Ironic's redfish management interface reads the
// same property).
func (d *redfishDriver) Health(ctx context.Context) (Health, error) {
	c, err := d.call(ctx)
	if err != nil {
		return HealthUnknown, err
	}
	s, err := d.system(c)
	if err != nil {
		return HealthUnknown, fmt.Errorf("get health from %s: %w", d.cfg.endpoint, err)
	}
	return redfishHealth(s.Status.Health), nil
}

// redfishHealth maps Redfish's Health enumeration to Ironic's (its
// redfish management HEALTH_MAP): the three values it has, unknown for
// anything else.
func redfishHealth(h common.Health) Health {
	switch h {
	case common.OKHealth:
		return HealthOK
	case common.WarningHealth:
		return HealthWarning
	case common.CriticalHealth:
		return HealthCritical
	}
	return HealthUnknown
}

// Health is the fake machine's fake_health from driver_info ("OK",
// "Warning", "Critical", "" for unknown); without that key the fake
// reads no health, as Ironic's fake management interface.
func (d *fakeDriver) Health(ctx context.Context) (Health, error) {
	if err := d.call(ctx, "get health"); err != nil {
		return HealthUnknown, err
	}
	if d.health == nil {
		return HealthUnknown, fmt.Errorf("%w: fake-hardware reads health only with fake_health in driver_info", ErrUnsupported)
	}
	return *d.health, nil
}
