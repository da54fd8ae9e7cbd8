package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
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
//	fake_state_file path of a JSON file that holds the machine's power, boot
//	                and media and a log of every power action, so that the
//	                machine outlives the worker process as a real BMC does
//	                (the crash tests count power-ons there)
//	fake_health     "OK", "Warning", "Critical" or "" (unknown): the health
//	                the machine reports (bmc/health.go); without it the fake
//	                reads no health, as Ironic's fake management interface
func init() { Register("fake-hardware", newFake) }

type fakeMachine struct {
	mu    sync.Mutex
	power PowerState
	boot  BootSetting
	media string
	// file is fake_state_file ("" keeps the machine in memory only).
	file string
}

// FakeState is what a fake machine with a fake_state_file keeps there.
type FakeState struct {
	Power PowerState  `json:"power"`
	Boot  BootSetting `json:"boot"`
	Media string      `json:"media,omitempty"`
	// Actions are the power actions carried out, in order.
	Actions []FakeAction `json:"actions,omitempty"`
}

// FakeAction is one power action a fake machine carried out.
type FakeAction struct {
	Action PowerAction `json:"action"`
	From   PowerState  `json:"from"`
	At     time.Time   `json:"at"`
}

// Boots counts the boots among the actions: a power-on of a machine that
// was off, and every reboot.
func (s FakeState) Boots() int {
	n := 0
	for _, a := range s.Actions {
		switch a.Action {
		case ActionPowerOn:
			if a.From != PowerOn {
				n++
			}
		case ActionReboot, ActionSoftReboot, ActionReset:
			n++
		}
	}
	return n
}

// ReadFakeState reads a fake_state_file.
func ReadFakeState(path string) (FakeState, error) {
	var s FakeState
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// load reads the state file, which another process (a worker before its
// crash) may have changed. Called with m.mu held.
func (m *fakeMachine) load() (FakeState, error) {
	if m.file == "" {
		return FakeState{}, nil
	}
	s, err := ReadFakeState(m.file)
	if errors.Is(err, fs.ErrNotExist) {
		return FakeState{Power: m.power, Boot: m.boot, Media: m.media}, nil
	}
	if err != nil {
		return s, fmt.Errorf("%w: fake_state_file: %v", ErrUnreachable, err)
	}
	m.power, m.boot, m.media = s.Power, s.Boot, s.Media
	return s, nil
}

// save writes the state back (a rename, so that a crash leaves the old or
// the new file). Called with m.mu held.
func (m *fakeMachine) save(s FakeState) error {
	if m.file == "" {
		return nil
	}
	s.Power, s.Boot, s.Media = m.power, m.boot, m.media
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := m.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("%w: fake_state_file: %v", ErrUnreachable, err)
	}
	if err := os.Rename(tmp, m.file); err != nil {
		return fmt.Errorf("%w: fake_state_file: %v", ErrUnreachable, err)
	}
	return nil
}

var fakeMachines sync.Map // fake_id -> *fakeMachine

type fakeDriver struct {
	m        *fakeMachine
	failRate float64
	latency  time.Duration
	// health is fake_health; nil reads no health (bmc/health.go).
	health *Health
}

func newFake(info map[string]any) (Driver, error) {
	id := fmt.Sprint(info["fake_id"])
	file, _ := info["fake_state_file"].(string)
	if file != "" {
		id = "file:" + file
	}
	m, _ := fakeMachines.LoadOrStore(id, &fakeMachine{power: PowerOff, boot: BootSetting{Device: BootDisk, Persistent: true}, file: file})
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
	if v, ok := info["fake_health"]; ok {
		h := Health(fmt.Sprint(v))
		switch h {
		case HealthOK, HealthWarning, HealthCritical, HealthUnknown:
		default:
			return nil, fmt.Errorf("%w: fake_health %v is not one of OK, Warning, Critical or empty", ErrInvalidConfig, v)
		}
		d.health = &h
	}
	return d, nil
}

func (d *fakeDriver) call(ctx context.Context, what string) error {
	start := time.Now()
	err := d.callOnce(ctx, what)
	observe("fake-hardware", what, start, err)
	return err
}

// callOnce is call without the measure.
func (d *fakeDriver) callOnce(ctx context.Context, what string) error {
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
	if _, err := d.m.load(); err != nil {
		return PowerUnknown, err
	}
	return d.m.power, nil
}

func (d *fakeDriver) SetPower(ctx context.Context, a PowerAction) error {
	if err := d.call(ctx, string(a)); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	st, err := d.m.load()
	if err != nil {
		return err
	}
	from := d.m.power
	switch a {
	case ActionPowerOn, ActionReboot, ActionSoftReboot, ActionReset:
		d.m.power = PowerOn
	case ActionPowerOff, ActionSoftOff:
		d.m.power = PowerOff
	default:
		return fmt.Errorf("%w: power action %q", ErrUnsupported, a)
	}
	st.Actions = append(st.Actions, FakeAction{Action: a, From: from, At: time.Now().UTC()})
	return d.m.save(st)
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
	st, err := d.m.load()
	if err != nil {
		return err
	}
	d.m.boot = s
	return d.m.save(st)
}

func (d *fakeDriver) GetBootDevice(ctx context.Context) (BootSetting, error) {
	if err := d.call(ctx, "get boot device"); err != nil {
		return BootSetting{}, err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	if _, err := d.m.load(); err != nil {
		return BootSetting{}, err
	}
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
	st, err := d.m.load()
	if err != nil {
		return err
	}
	d.m.media = url
	return d.m.save(st)
}

func (d *fakeDriver) EjectMedia(ctx context.Context) error {
	if err := d.call(ctx, "eject media"); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	st, err := d.m.load()
	if err != nil {
		return err
	}
	d.m.media = ""
	return d.m.save(st)
}

func (d *fakeDriver) Close() error { return nil }
