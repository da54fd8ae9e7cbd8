package bmc

import (
	"context"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Layouts of real services: where the CD device lives and how it is reached.
var redfishLayouts = []struct {
	name   string
	dir    string
	edit   func(b *recordedBMC)
	cd     string // the device InsertMedia must pick
	system string
}{
	{
		name: "ilo-manager-vmedia", dir: "hpe-ilo-dl325",
		cd: "/redfish/v1/Managers/1/VirtualMedia/2", system: "/redfish/v1/Systems/1",
	},
	{
		// DMTF mockup: the manager does not link virtual media, the system
		// does; its CD has no actions (PATCH fallback) and holds an image.
		name: "dmtf-system-vmedia", dir: "dmtf-public-rackmount1",
		cd: "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1", system: "/redfish/v1/Systems/437XR1138R2",
	},
	{
		// Manager links to the system's collection (iDRAC 10, sushy bug
		// 2039458); the action targets are offered.
		name: "system-vmedia-linked-from-manager", dir: "dmtf-public-rackmount1",
		edit: func(b *recordedBMC) {
			b.docs["/redfish/v1/Managers/BMC"]["VirtualMedia"] = map[string]any{"@odata.id": "/redfish/v1/Systems/437XR1138R2/VirtualMedia"}
			cd := "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1"
			b.docs[cd]["Actions"] = map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{"target": cd + "/Actions/VirtualMedia.InsertMedia"},
				"#VirtualMedia.EjectMedia":  map[string]any{"target": cd + "/Actions/VirtualMedia.EjectMedia"},
			}
		},
		cd: "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1", system: "/redfish/v1/Systems/437XR1138R2",
	},
	{
		// Cisco UCS style: the only optical device says DVD, not CD; the
		// USB device comes first.
		name: "dvd-only", dir: "hpe-ilo-dl325",
		edit: func(b *recordedBMC) {
			b.docs["/redfish/v1/Managers/1/VirtualMedia/2"]["MediaTypes"] = []any{"DVD"}
		},
		cd: "/redfish/v1/Managers/1/VirtualMedia/2", system: "/redfish/v1/Systems/1",
	},
	{
		name: "no-session-service", dir: "hpe-ilo-dl325",
		edit: func(b *recordedBMC) { b.noSessions = true },
		cd:   "/redfish/v1/Managers/1/VirtualMedia/2", system: "/redfish/v1/Systems/1",
	},
}

func newTestRedfish(t *testing.T, info map[string]any) Driver {
	t.Helper()
	d, err := New("redfish", info)
	if err != nil {
		t.Fatalf("New(redfish): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestRedfishLayouts(t *testing.T) {
	ctx := context.Background()
	const image = "http://10.0.0.1:8080/deploy/agent.iso"
	for _, l := range redfishLayouts {
		t.Run(l.name, func(t *testing.T) {
			b := startBMC(t, l.dir, l.edit)
			d := newTestRedfish(t, b.info(nil))

			if err := d.Validate(ctx); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			// Off, then on; a second power on is a no-op on the BMC.
			for _, step := range []struct {
				action PowerAction
				want   string
			}{{ActionPowerOff, "Off"}, {ActionPowerOn, "On"}} {
				if err := d.SetPower(ctx, step.action); err != nil {
					t.Fatalf("SetPower(%s): %v", step.action, err)
				}
				if got := b.doc(l.system)["PowerState"]; got != step.want {
					t.Fatalf("after %s the BMC's PowerState is %v, want %s", step.action, got, step.want)
				}
			}
			before := len(b.actionLog())
			if err := d.SetPower(ctx, ActionPowerOn); err != nil {
				t.Fatalf("second power on: %v", err)
			}
			if after := b.actionLog(); len(after) != before {
				t.Fatalf("power on of a node that is on sent %v to the BMC", after[before:])
			}
			if ps, err := d.PowerState(ctx); err != nil || ps != PowerOn {
				t.Fatalf("PowerState = %q, %v; want power on", ps, err)
			}

			want := BootSetting{Device: BootPXE, Mode: BootModeUEFI}
			if err := d.SetBootDevice(ctx, want); err != nil {
				t.Fatalf("SetBootDevice: %v", err)
			}
			boot := b.doc(l.system)["Boot"].(map[string]any)
			if boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Once" || boot["BootSourceOverrideMode"] != "UEFI" {
				t.Fatalf("BMC boot override = %v", boot)
			}
			if got, err := d.GetBootDevice(ctx); err != nil || got != want {
				t.Fatalf("GetBootDevice = %+v, %v; want %+v", got, err, want)
			}
			if devs, err := d.SupportedBootDevices(ctx); err != nil || len(devs) != 4 {
				t.Fatalf("SupportedBootDevices = %v, %v", devs, err)
			}

			if err := d.InsertMedia(ctx, image); err != nil {
				t.Fatalf("InsertMedia: %v", err)
			}
			cd := b.doc(l.cd)
			if cd["Image"] != image || cd["Inserted"] != true || cd["WriteProtected"] != true {
				t.Fatalf("CD device %s after insert: Image=%v Inserted=%v WriteProtected=%v", l.cd, cd["Image"], cd["Inserted"], cd["WriteProtected"])
			}
			if err := d.EjectMedia(ctx); err != nil {
				t.Fatalf("EjectMedia: %v", err)
			}
			if cd := b.doc(l.cd); cd["Inserted"] != false {
				t.Fatalf("CD device %s still inserted after eject", l.cd)
			}
			n := len(b.actionLog())
			if err := d.EjectMedia(ctx); err != nil {
				t.Fatalf("second EjectMedia: %v", err)
			}
			if len(b.actionLog()) != n {
				t.Fatalf("eject of an empty device reached the BMC: %v", b.actionLog()[n:])
			}
			if b.noSessions {
				if b.sessionsCreated() != 0 || b.status(200) == 0 {
					t.Fatalf("basic-auth service: sessions created %d", b.sessionsCreated())
				}
			} else if b.sessionsCreated() != 1 {
				t.Fatalf("one driver's calls created %d sessions, want 1", b.sessionsCreated())
			}
		})
	}
}

func TestRedfishMediaInsertEjectsFirstAndRetries(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
		vm := b.docs["/redfish/v1/Managers/1/VirtualMedia/2"]
		vm["Inserted"], vm["Image"] = true, "http://old/image.iso"
		b.failInsertAfter = 2 // Dell: insert right after eject refused twice
	})
	d := newTestRedfish(t, b.info(nil))
	if err := d.InsertMedia(context.Background(), "http://new/agent.iso"); err != nil {
		t.Fatalf("InsertMedia: %v", err)
	}
	want := []string{
		"EjectMedia /redfish/v1/Managers/1/VirtualMedia/2",
		"InsertMedia refused", "InsertMedia refused",
		"InsertMedia /redfish/v1/Managers/1/VirtualMedia/2 http://new/agent.iso",
	}
	if got := b.actionLog(); !slices.Equal(got, want) {
		t.Fatalf("BMC saw %q, want %q", got, want)
	}
}

func TestRedfishMediaInsertGivesUp(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
		vm := b.docs["/redfish/v1/Managers/1/VirtualMedia/2"]
		vm["Inserted"], vm["Image"] = true, "http://old/image.iso"
		b.failInsertAfter = 100
	})
	d := newTestRedfish(t, b.info(nil))
	err := d.InsertMedia(context.Background(), "http://new/agent.iso")
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "VRM0021") && !strings.Contains(err.Error(), "Virtual Media is detached") {
		t.Fatalf("InsertMedia error = %v; want ErrBusy with the BMC's message", err)
	}
	refused := 0
	for _, a := range b.actionLog() {
		if a == "InsertMedia refused" {
			refused++
		}
	}
	if refused != DefaultMediaInsertAttempts {
		t.Fatalf("insert tried %d times, want %d", refused, DefaultMediaInsertAttempts)
	}
}

func TestRedfishNoCDDevice(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
		b.docs["/redfish/v1/Managers/1/VirtualMedia/2"]["MediaTypes"] = []any{"USBStick"}
	})
	d := newTestRedfish(t, b.info(nil))
	if err := d.InsertMedia(context.Background(), "http://x/a.iso"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("InsertMedia without a CD device: %v; want ErrUnsupported", err)
	}
}

func TestRedfishBootQuirks(t *testing.T) {
	ctx := context.Background()
	t.Run("once kept as continuous", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.onceToContinuous = true })
		d := newTestRedfish(t, b.info(nil))
		if err := d.SetBootDevice(ctx, BootSetting{Device: BootDisk}); err != nil {
			t.Fatalf("SetBootDevice: %v", err)
		}
		got, err := d.GetBootDevice(ctx)
		if err != nil || got.Device != BootDisk || !got.Persistent {
			t.Fatalf("GetBootDevice = %+v, %v; want disk, persistent", got, err)
		}
	})
	t.Run("boot mode rejected", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.rejectBootMode = true })
		d := newTestRedfish(t, b.info(nil))
		err := d.SetBootDevice(ctx, BootSetting{Device: BootPXE, Mode: BootModeBIOS})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "read only property") {
			t.Fatalf("SetBootDevice with a fixed boot mode: %v; want ErrUnsupported with the BMC's message", err)
		}
	})
	t.Run("target not offered", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
			b.docs["/redfish/v1/Systems/1"]["Boot"].(map[string]any)["BootSourceOverrideTarget@Redfish.AllowableValues"] = []any{"None", "Pxe", "Hdd"}
		})
		d := newTestRedfish(t, b.info(nil))
		if err := d.SetBootDevice(ctx, BootSetting{Device: BootCDROM}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("SetBootDevice(cdrom): %v; want ErrUnsupported", err)
		}
		if devs, _ := d.SupportedBootDevices(ctx); !slices.Equal(devs, []BootDevice{BootPXE, BootDisk}) {
			t.Fatalf("SupportedBootDevices = %v", devs)
		}
	})
}

func TestRedfishPowerActions(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		start   string
		action  PowerAction
		edit    func(b *recordedBMC)
		want    []string
		wantEnd string
	}{
		{"reboot when on is off then on", "On", ActionReboot, nil, []string{"Reset ForceOff", "Reset On"}, "On"},
		{"reboot when off powers on", "Off", ActionReboot, nil, []string{"Reset On"}, "On"},
		{"power off when off is a no-op", "Off", ActionPowerOff, nil, nil, "Off"},
		{"soft off", "On", ActionSoftOff, nil, []string{"Reset GracefulShutdown"}, "Off"},
		{"soft reboot", "On", ActionSoftReboot, nil, []string{"Reset GracefulShutdown", "Reset On"}, "On"},
		{"power on while powering on only waits", "PoweringOn", ActionPowerOn,
			func(b *recordedBMC) { b.pending, b.lagLeft = "On", 2 }, nil, "On"},
		{"power change shows late", "Off", ActionPowerOn,
			func(b *recordedBMC) { b.powerLag = 5 }, []string{"Reset On"}, "On"},
		{"reboot without On uses ForceRestart", "On", ActionReboot,
			func(b *recordedBMC) {
				b.docs["/redfish/v1/Systems/1"]["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)["ResetType@Redfish.AllowableValues"] = []any{"ForceRestart", "ForceOff", "PushPowerButton"}
			}, []string{"Reset ForceRestart"}, "On"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
				b.docs["/redfish/v1/Systems/1"]["PowerState"] = tc.start
				if tc.edit != nil {
					tc.edit(b)
				}
			})
			d := newTestRedfish(t, b.info(nil))
			if err := d.SetPower(ctx, tc.action); err != nil {
				t.Fatalf("SetPower(%s): %v", tc.action, err)
			}
			if got := b.actionLog(); !slices.Equal(got, tc.want) {
				t.Fatalf("BMC saw %q, want %q", got, tc.want)
			}
			if got := b.doc("/redfish/v1/Systems/1")["PowerState"]; got != tc.wantEnd {
				t.Fatalf("PowerState %v, want %s", got, tc.wantEnd)
			}
		})
	}
}

// TestRedfishSoftPowerOffIgnored: GracefulShutdown that the OS ignores
// leaves the machine on; the soft power off and the soft reboot fail at the
// deadline (WithPowerTimeout, the API's timeout) with Ironic's
// PowerStateFailure, and nothing forces the power off.
func TestRedfishSoftPowerOffIgnored(t *testing.T) {
	for _, action := range []PowerAction{ActionSoftOff, ActionSoftReboot} {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
			b.docs["/redfish/v1/Systems/1"]["PowerState"] = "On"
			b.ignoreGraceful = true
		})
		d := newTestRedfish(t, b.info(map[string]any{KeySoftPowerOffTimeout: "1h"}))
		err := d.SetPower(WithPowerTimeout(context.Background(), 100*time.Millisecond), action)
		if !errors.Is(err, ErrSoftPowerOffTimeout) || errors.Is(err, ErrBusy) {
			t.Fatalf("%s ignored by the OS: %v; want ErrSoftPowerOffTimeout, not retryable", action, err)
		}
		if got := b.actionLog(); !slices.Equal(got, []string{"Reset GracefulShutdown"}) {
			t.Fatalf("%s: BMC saw %q, want GracefulShutdown only", action, got)
		}
		if got := b.doc("/redfish/v1/Systems/1")["PowerState"]; got != "On" {
			t.Fatalf("%s: PowerState %v, want On", action, got)
		}
	}
}

func TestRedfishPowerWaitTimesOut(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
		b.docs["/redfish/v1/Systems/1"]["PowerState"] = "Off"
		b.powerLag = 1 << 30 // accepted, never done
	})
	d := newTestRedfish(t, b.info(map[string]any{KeyPowerStateTimeout: "30ms"}))
	err := d.SetPower(context.Background(), ActionPowerOn)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), `still "Off"`) {
		t.Fatalf("SetPower on a BMC that never powers on: %v", err)
	}
}

func TestRedfishFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("5xx retried", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		d := newTestRedfish(t, b.info(nil))
		b.setFault(DefaultRedfishAttempts-1, 0)
		if _, err := d.PowerState(ctx); err != nil {
			t.Fatalf("PowerState through %d 503s: %v", DefaultRedfishAttempts-1, err)
		}
		if n := b.status(503); n != DefaultRedfishAttempts-1 {
			t.Fatalf("BMC answered 503 %d times", n)
		}
	})
	t.Run("5xx persists", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		d := newTestRedfish(t, b.info(nil))
		b.setFault(1000, 0)
		_, err := d.PowerState(ctx)
		if !errors.Is(err, ErrBusy) || !Retryable(err) || !strings.Contains(err.Error(), "temporarily unavailable") {
			t.Fatalf("PowerState against a BMC that answers 503: %v", err)
		}
		if n := b.status(503); n != DefaultRedfishAttempts {
			t.Fatalf("BMC answered 503 %d times, want %d attempts", n, DefaultRedfishAttempts)
		}
	})
	t.Run("action not repeated on 500", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.failInsertAfter = 1; b.justEjected = true })
		d := newTestRedfish(t, b.info(nil))
		if err := d.InsertMedia(ctx, "http://x/a.iso"); !errors.Is(err, ErrBusy) {
			t.Fatalf("InsertMedia: %v; want ErrBusy", err)
		}
		if got := b.actionLog(); !slices.Equal(got, []string{"InsertMedia refused"}) {
			t.Fatalf("BMC saw %q", got)
		}
	})
	t.Run("slow beyond the timeout", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		d := newTestRedfish(t, b.info(map[string]any{"redfish_timeout": "50ms", "redfish_connection_attempts": 2}))
		if err := d.Validate(ctx); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		b.setFault(0, time.Minute)
		_, err := d.PowerState(ctx)
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no answer within 50ms") {
			t.Fatalf("PowerState against a stalled BMC: %v", err)
		}
	})
	t.Run("session expired mid-run", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		d := newTestRedfish(t, b.info(nil))
		for i := range 3 {
			if _, err := d.PowerState(ctx); err != nil {
				t.Fatalf("PowerState %d: %v", i, err)
			}
			if i < 2 {
				b.expireSessions()
			}
		}
		if b.sessionsCreated() != 3 || b.liveSessions() != 1 {
			t.Fatalf("sessions created %d, live %d; want 3 logins after 2 expiries, 1 live", b.sessionsCreated(), b.liveSessions())
		}
	})
	t.Run("403 with a live session", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		d := newTestRedfish(t, b.info(nil))
		if err := d.Validate(ctx); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		b.mu.Lock()
		b.forbid = 1
		b.mu.Unlock()
		if _, err := d.PowerState(ctx); err != nil {
			t.Fatalf("PowerState after one 403: %v", err)
		}
		if b.sessionsCreated() != 2 || b.liveSessions() != 1 {
			t.Fatalf("sessions created %d, live %d; the refused session must be logged out", b.sessionsCreated(), b.liveSessions())
		}
		b.mu.Lock()
		b.forbid = 2
		b.mu.Unlock()
		_, err := d.PowerState(ctx)
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "insufficient privileges") {
			t.Fatalf("PowerState refused after a fresh login: %v; want ErrAuth with the BMC's message", err)
		}
		if b.liveSessions() != 1 {
			t.Fatalf("live sessions %d after refusals", b.liveSessions())
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		const bad = "not-the-Pa55word"
		d := newTestRedfish(t, b.info(map[string]any{"redfish_password": bad}))
		err := d.Validate(ctx)
		if !errors.Is(err, ErrAuth) || Retryable(err) || strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "authorization error") {
			t.Fatalf("Validate with a wrong password: %v", err)
		}
	})
	t.Run("wrong password basic auth", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.noSessions = true })
		const bad = "not-the-Pa55word"
		d := newTestRedfish(t, b.info(map[string]any{"redfish_password": bad}))
		err := d.Validate(ctx)
		if !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), bad) {
			t.Fatalf("Validate with a wrong password: %v", err)
		}
	})
	t.Run("session mode without SessionService", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.noSessions = true })
		d := newTestRedfish(t, b.info(map[string]any{"redfish_auth_type": "session"}))
		if err := d.Validate(ctx); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Validate: %v; want ErrUnsupported", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		info := b.info(nil)
		b.srv.Close()
		d := newTestRedfish(t, info)
		err := d.Validate(ctx)
		if !errors.Is(err, ErrUnreachable) || !Retryable(err) {
			t.Fatalf("Validate against a closed port: %v", err)
		}
	})
	t.Run("system id", func(t *testing.T) {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		for id, wantErr := range map[string]error{"1": nil, "/redfish/v1/Systems/1": nil, "2": ErrInvalidConfig} {
			d := newTestRedfish(t, b.info(map[string]any{"redfish_system_id": id}))
			if err := d.Validate(ctx); !errors.Is(err, wantErr) {
				t.Errorf("redfish_system_id %q: %v, want %v", id, err, wantErr)
			}
		}
	})
}

// TestRedfishSessionsDoNotLeak builds a driver per operation, as activities
// do, through expiries and re-logins: the BMC must never hold more than one
// session for us, and nothing may be left running afterwards.
func TestRedfishSessionsDoNotLeak(t *testing.T) {
	ctx := context.Background()
	CloseSessions(ctx)
	baseline := runtime.NumGoroutine()

	b := startBMC(t, "hpe-ilo-dl325", nil)
	info := b.info(nil)
	expiries := 0
	for i := range 1000 {
		d, err := New("redfish", info)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		switch i % 4 {
		case 0:
			_, err = d.PowerState(ctx)
		case 1:
			err = d.SetBootDevice(ctx, BootSetting{Device: BootPXE})
		case 2:
			_, err = d.GetBootDevice(ctx)
		case 3:
			err = d.SetPower(ctx, ActionPowerOn)
		}
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		d.Close()
		if n := b.liveSessions(); n > 1 {
			t.Fatalf("after operation %d the BMC holds %d sessions", i, n)
		}
		if i%100 == 99 {
			b.expireSessions()
			expiries++
		}
	}
	if got := b.sessionsCreated(); got != expiries {
		t.Fatalf("1000 operations created %d sessions, want %d (one per expiry)", got, expiries)
	}
	CloseSessions(ctx)
	if n := b.liveSessions(); n != 0 {
		t.Fatalf("after CloseSessions the BMC still holds %d sessions", n)
	}
	b.srv.Close()

	var now int
	for range 200 { // settle: closed connections end their goroutines
		if now = runtime.NumGoroutine(); now <= baseline {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("goroutines: %d before, %d after\n%s", baseline, now, buf[:runtime.Stack(buf, true)])
}

func TestRedfishSessionCacheEviction(t *testing.T) {
	ctx := context.Background()
	CloseSessions(ctx)
	old := redfishSessions.size
	redfishSessions.size = 2
	t.Cleanup(func() { redfishSessions.size = old })

	var bmcs []*recordedBMC
	for range 3 {
		b := startBMC(t, "hpe-ilo-dl325", nil)
		bmcs = append(bmcs, b)
		d := newTestRedfish(t, b.info(nil))
		if err := d.Validate(ctx); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		d.Close()
	}
	redfishSessions.logouts.Wait()
	if n := bmcs[0].liveSessions(); n != 0 {
		t.Fatalf("the least recently used BMC keeps %d sessions after eviction", n)
	}
	for _, b := range bmcs[1:] {
		if n := b.liveSessions(); n != 1 {
			t.Fatalf("a cached BMC holds %d sessions, want 1", n)
		}
	}
	CloseSessions(ctx)
	for _, b := range bmcs {
		if n := b.liveSessions(); n != 0 {
			t.Fatalf("after CloseSessions a BMC holds %d sessions", n)
		}
	}
}

func TestRedfishConfig(t *testing.T) {
	cases := []struct {
		name     string
		info     map[string]any
		wantErr  string // substring naming the key; "" = valid
		endpoint string
		verify   bool
	}{
		{"bare host means https", map[string]any{"redfish_address": "10.0.0.5"}, "", "https://10.0.0.5", true},
		{"host and port", map[string]any{"redfish_address": "bmc.example:8443"}, "", "https://bmc.example:8443", true},
		{"http URL with path", map[string]any{"redfish_address": "http://10.0.0.5:8000/redfish/v1"}, "", "http://10.0.0.5:8000", true},
		{"verify False string", map[string]any{"redfish_address": "h", "redfish_verify_ca": "False"}, "", "https://h", false},
		{"verify bool", map[string]any{"redfish_address": "h", "redfish_verify_ca": false}, "", "https://h", false},
		{"missing address", map[string]any{"redfish_username": "u"}, "redfish_address", "", false},
		{"bad scheme", map[string]any{"redfish_address": "ftp://h"}, "redfish_address", "", false},
		{"verify neither bool nor file", map[string]any{"redfish_address": "h", "redfish_verify_ca": "/no/such/ca.pem"}, "redfish_verify_ca", "", false},
		{"auth type", map[string]any{"redfish_address": "h", "redfish_auth_type": "kerberos"}, "redfish_auth_type", "", false},
		{"timeout", map[string]any{"redfish_address": "h", "redfish_timeout": "soon"}, "redfish_timeout", "", false},
		{"zero timeout", map[string]any{"redfish_address": "h", "redfish_timeout": 0}, "redfish_timeout", "", false},
		{"power timeout", map[string]any{"redfish_address": "h", KeyPowerStateTimeout: "x"}, KeyPowerStateTimeout, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseRedfishConfig(tc.info)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want ErrInvalidConfig naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cfg.endpoint != tc.endpoint || cfg.verify != tc.verify || cfg.timeout != DefaultRedfishTimeout {
				t.Fatalf("cfg = %+v", cfg)
			}
		})
	}
}

func TestRedfishTLS(t *testing.T) {
	ctx := context.Background()
	b := startBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) { b.tls = true })
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(b.srv.URL, "https://")
	cases := []struct {
		name    string
		extra   map[string]any
		wantErr error
	}{
		{"bare host means https, CA bundle trusted", map[string]any{"redfish_address": host, "redfish_verify_ca": ca}, nil},
		{"verification off", map[string]any{"redfish_verify_ca": "False"}, nil},
		{"unknown CA refused", map[string]any{"redfish_verify_ca": "True"}, ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestRedfish(t, b.info(tc.extra))
			err := d.Validate(ctx)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		driver   string
		info     map[string]any
		required []string
		missing  []string
	}{
		{"redfish", map[string]any{"redfish_username": "u"}, []string{"redfish_address"}, []string{"redfish_address"}},
		{"redfish", map[string]any{"redfish_address": "h"}, []string{"redfish_address"}, nil},
		{"ipmi", map[string]any{"ipmi_address": ""}, []string{"ipmi_address"}, []string{"ipmi_address"}},
		{"fake-hardware", nil, nil, nil},
	} {
		req, opt, err := Describe(tc.driver)
		if err != nil || !slices.Equal(req, tc.required) || len(opt) == 0 {
			t.Fatalf("Describe(%s) = %v, %v, %v", tc.driver, req, opt, err)
		}
		if missing, _ := MissingKeys(tc.driver, tc.info); !slices.Equal(missing, tc.missing) {
			t.Fatalf("MissingKeys(%s, %v) = %v, want %v", tc.driver, tc.info, missing, tc.missing)
		}
		if tc.missing != nil {
			if _, err := New(tc.driver, tc.info); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.missing[0]) {
				t.Fatalf("New(%s) without %v: %v", tc.driver, tc.missing, err)
			}
		}
	}
	if _, _, err := Describe("idrac"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Describe(idrac): %v", err)
	}
}

// Boot device uefihttp with a URI is Redfish's UefiHttp with
// Boot.HttpBootUri (what the redfish-https boot interface sets), on the
// recorded HPE iLO 5, which offers UefiHttp; the BMC keeps both.
func TestRedfishUefiHTTPBootDevice(t *testing.T) {
	ctx := context.Background()
	b := startBMC(t, "hpe-ilo-dl325", nil)
	d := newTestRedfish(t, b.info(nil))
	const uri = "http://10.0.0.1:8080/iso/agent.iso"
	if err := d.SetBootDevice(ctx, BootSetting{Device: BootUefiHTTP, Mode: BootModeUEFI, HTTPBootURI: uri}); err != nil {
		t.Fatalf("SetBootDevice(uefihttp): %v", err)
	}
	boot := b.doc("/redfish/v1/Systems/1")["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "UefiHttp" || boot["HttpBootUri"] != uri || boot["BootSourceOverrideEnabled"] != "Once" {
		t.Fatalf("BMC boot override = target %v, uri %v, enabled %v; want UefiHttp, %s, Once", boot["BootSourceOverrideTarget"], boot["HttpBootUri"], boot["BootSourceOverrideEnabled"], uri)
	}
}
