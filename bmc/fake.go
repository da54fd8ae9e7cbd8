package bmc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// The fake driver backs Ironic's fake-hardware type: it talks to no BMC and
// keeps power and boot state in memory, per fake_id in driver_info (default
// one shared machine). It exists for unit tests and scale benchmarks, and can
// inject faults from driver_info:
//
//	fake_fail_rate  float 0..1: fraction of calls that fail with ErrBusy
//	fake_latency    Go duration ("2s") added to every call
func init() { Register("fake-hardware", newFake) }

type fakeMachine struct {
	mu    sync.Mutex
	power PowerState
	boot  BootSetting
	media string
}

var fakeMachines sync.Map // fake_id -> *fakeMachine

type fakeDriver struct {
	m        *fakeMachine
	failRate float64
	latency  time.Duration
}

func newFake(info map[string]any) (Driver, error) {
	id := fmt.Sprint(info["fake_id"])
	m, _ := fakeMachines.LoadOrStore(id, &fakeMachine{power: PowerOff, boot: BootSetting{Device: BootDisk, Persistent: true}})
	d := &fakeDriver{m: m.(*fakeMachine)}
	if v, ok := info["fake_fail_rate"]; ok {
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("%w: fake_fail_rate %v is not a number between 0 and 1", ErrInvalidConfig, v)
		}
		d.failRate = f
	}
	if v, ok := info["fake_latency"]; ok {
		l, err := time.ParseDuration(fmt.Sprint(v))
		if err != nil {
			return nil, fmt.Errorf("%w: fake_latency %v: %v", ErrInvalidConfig, v, err)
		}
		d.latency = l
	}
	return d, nil
}

func (d *fakeDriver) call(ctx context.Context, what string) error {
	if d.latency > 0 {
		t := time.NewTimer(d.latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrUnreachable, what, ctx.Err())
		case <-t.C:
		}
	}
	if d.failRate > 0 && rand.Float64() < d.failRate {
		return fmt.Errorf("%w: %s: injected fault (fake_fail_rate)", ErrBusy, what)
	}
	return nil
}

func (d *fakeDriver) Validate(ctx context.Context) error { return d.call(ctx, "validate") }

func (d *fakeDriver) PowerState(ctx context.Context) (PowerState, error) {
	if err := d.call(ctx, "get power state"); err != nil {
		return PowerUnknown, err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	return d.m.power, nil
}

func (d *fakeDriver) SetPower(ctx context.Context, a PowerAction) error {
	if err := d.call(ctx, string(a)); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	switch a {
	case ActionPowerOn, ActionReboot, ActionSoftReboot:
		d.m.power = PowerOn
	case ActionPowerOff, ActionSoftOff:
		d.m.power = PowerOff
	default:
		return fmt.Errorf("%w: power action %q", ErrUnsupported, a)
	}
	return nil
}

func (d *fakeDriver) SetBootDevice(ctx context.Context, s BootSetting) error {
	if err := d.call(ctx, "set boot device"); err != nil {
		return err
	}
	switch s.Device {
	case BootPXE, BootDisk, BootCDROM, BootBIOS:
	default:
		return fmt.Errorf("%w: boot device %q", ErrUnsupported, s.Device)
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	d.m.boot = s
	return nil
}

func (d *fakeDriver) GetBootDevice(ctx context.Context) (BootSetting, error) {
	if err := d.call(ctx, "get boot device"); err != nil {
		return BootSetting{}, err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	return d.m.boot, nil
}

func (d *fakeDriver) SupportedBootDevices(context.Context) ([]BootDevice, error) {
	return []BootDevice{BootPXE, BootDisk, BootCDROM, BootBIOS}, nil
}

func (d *fakeDriver) InsertMedia(ctx context.Context, url string) error {
	if err := d.call(ctx, "insert media"); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	d.m.media = url
	return nil
}

func (d *fakeDriver) EjectMedia(ctx context.Context) error {
	if err := d.call(ctx, "eject media"); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	d.m.media = ""
	return nil
}

func (d *fakeDriver) Close() error { return nil }
