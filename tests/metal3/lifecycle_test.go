package metal3

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/tests/metal3/bmo"
)

// requeue replaces BMO's 10 s requeue delay: the phases poll every 200 ms.
const requeue = 200 * time.Millisecond

// client is a BMO provisioner for host on the stack, with its recorder.
type client struct {
	// logs is the end of the stack's logs, for failure messages.
	logs func() string
	t    *testing.T
	p    *bmo.Provisioner
	rec  *bmo.Recorder
	h    *bmo.Host
}

func newClient(t *testing.T, h *bmo.Host) *client {
	t.Helper()
	rec := &bmo.Recorder{}
	p, err := bmo.New(bmo.Config{Endpoint: stack.APIURL + "/v1", Username: apiUser, Password: apiPassword, DeployKernelURL: "http://127.0.0.1:1/images/agent.kernel",
		DeployRamdiskURL: "http://127.0.0.1:1/images/agent.initramfs", RequeueDelay: requeue, Transport: rec}, h)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, p: p, rec: rec, h: h}
}

func (c *client) logTail() string {
	if c.logs != nil {
		return c.logs()
	}
	return devLog()
}

// check compares the calls of the phase just run with its golden list.
// A pass that ended on a write answered 409 is BMO's retry: the next pass
// must begin with the same calls (BMO tried again after its delay); the
// retried pass is then left out of the comparison.
func (c *client) check(phase string, golden []want) []bmo.Call {
	c.t.Helper()
	calls := c.rec.Take()
	s := subst{node: c.h.ProvisioningID, name: c.h.Namespace + "~" + c.h.Name, bare: c.h.Name, version: c.p.Microversion()}
	calls, retries, why := dropRetries(calls)
	if why == "" {
		if ok, w := s.match(golden, calls); !ok {
			why = w
		}
	}
	if why != "" {
		var b strings.Builder
		for i, call := range calls {
			fmt.Fprintf(&b, "\n  %d pass %d: %s %s?%s v%s → %d %s", i, call.Pass, call.Method, call.Path, call.Query, call.Version, call.Status, strings.Join(bodyKeys(call.Body), ","))
		}
		c.t.Fatalf("%s: the calls differ from BMO's: %s\ncalls:%s", phase, why, b.String())
	}
	c.t.Logf("%s: %d calls as BMO makes them (%d retries after 409)", phase, len(calls), retries)
	return calls
}

// dropRetries leaves out the passes that ended on a write answered 409,
// once checked that the pass after each began the same way.
func dropRetries(calls []bmo.Call) ([]bmo.Call, int, string) {
	var out []bmo.Call
	retries := 0
	for i := 0; i < len(calls); {
		j := i
		for j < len(calls) && calls[j].Pass == calls[i].Pass {
			j++
		}
		pass, last := calls[i:j], calls[j-1]
		if last.Status == 409 && last.Method != "GET" {
			if len(calls)-j < len(pass) {
				return nil, 0, fmt.Sprintf("pass %d ended on a 409 and was not tried again", last.Pass)
			}
			for k := range pass {
				if n := calls[j+k]; n.Method != pass[k].Method || n.Path != pass[k].Path || n.Pass != calls[j].Pass {
					return nil, 0, fmt.Sprintf("pass %d ended on a 409, the next pass did not try the same calls again", last.Pass)
				}
			}
			retries++
		} else {
			out = append(out, pass...)
		}
		i = j
	}
	return out, retries, ""
}

// run drives a phase to its end; a failure fails the test with the
// stack's log.
func (c *client) run(phase string, timeout time.Duration, step func(context.Context) (bmo.Result, error)) {
	c.t.Helper()
	pass := func(ctx context.Context) (bmo.Result, error) {
		c.rec.NextPass()
		return step(ctx)
	}
	if err := bmo.Run(ctxFor(c.t, timeout), pass); err != nil {
		c.t.Fatalf("%s: %v\n%s", phase, err, c.logTail())
	}
}

// initAndRegister runs TryInit and registration. It skips the test, with
// the reason, when the API refuses what BMO v0.13.2 sends at every node
// create: disable_power_off, a node field from API 1.95, which BMO sets
// whatever the microversion it chose.
func (c *client) initAndRegister(mac string) {
	c.t.Helper()
	c.initAndRegisterWith(mac, goldenRegister(mac))
}

// initAndRegisterWith is initAndRegister with the registration's golden list.
func (c *client) initAndRegisterWith(mac string, golden []want) {
	c.t.Helper()
	ctx := ctxFor(c.t, time.Minute)
	ready, err := c.p.TryInit(ctx)
	if err != nil || !ready {
		c.t.Fatalf("TryInit: ready %v, %v", ready, err)
	}
	c.check("init", goldenInit)
	if want := bmo.ChooseMicroversion(c.p.MaxVersion); c.p.Microversion() != want {
		c.t.Fatalf("chosen version %s, want %s for a maximum of 1.%d", c.p.Microversion(), want, c.p.MaxVersion)
	}
	c.t.Logf("API maximum 1.%d: BMO sends %s", c.p.MaxVersion, c.p.Microversion())
	err = bmo.Run(ctxFor(c.t, 2*time.Minute), func(ctx context.Context) (bmo.Result, error) {
		c.rec.NextPass()
		return c.p.Register(ctx, false)
	})
	// Below 1.95 the field is unknown (400, an additional property) or
	// known but not at this version (406).
	refused := bmo.StatusOf(err) == 400 || bmo.StatusOf(err) == 406
	if err != nil && c.p.MaxVersion < bmo.DisablePowerOffMinor && refused && strings.Contains(err.Error(), "failed to register host in ironic") {
		c.rec.Take()
		c.t.Skipf("ironflow serves API 1.%d, below 1.95: BMO v0.13.2 sends \"disable_power_off\": false in every node create "+
			"(sent at %s, refused: %v); registration, and every phase after it, needs the disable_power_off node field (API 1.95)",
			c.p.MaxVersion, c.p.Microversion(), err)
	}
	if err != nil {
		c.t.Fatalf("register: %v\n%s", err, c.logTail())
	}
	c.check("register", golden)
}

// adopt runs BMO's adoption of an externally provisioned host. It skips
// the test, with the reason, when the API refuses the adopt verb.
func (c *client) adopt(timeout time.Duration) {
	c.t.Helper()
	err := bmo.Run(ctxFor(c.t, timeout), func(ctx context.Context) (bmo.Result, error) {
		c.rec.NextPass()
		return c.p.Adopt(ctx)
	})
	if err != nil && bmo.StatusOf(err) == 400 && strings.Contains(err.Error(), "adopt") {
		c.t.Skipf("ironflow refuses the adopt verb (API 1.17): %v; an externally provisioned host cannot be adopted until it is served", err)
	}
	if err != nil {
		c.t.Fatalf("adopt: %v\n%s", err, c.logTail())
	}
	c.check("adopt", goldenAdopt)
}

// dataImage runs BMO's DataImage reconciler on the host: attach url, read
// the status until inserted, detach, read it until ejected; seen is told
// each settled status with the image.
func (c *client) dataImage(url string, seen func(inserted bool, image string)) {
	c.t.Helper()
	ctx := ctxFor(c.t, 3*time.Minute)
	if err := c.p.AttachDataImage(ctx, url); err != nil {
		c.t.Fatalf("attach the data image: %v\n%s", err, c.logTail())
	}
	waitStatus := func(want bool) {
		for {
			c.rec.NextPass()
			got, err := c.p.GetDataImageStatus(ctx)
			if err == nil && got == want {
				return
			}
			if err != nil && !errors.Is(err, bmo.ErrNodeIsBusy) {
				c.t.Fatalf("data image status: %v\n%s", err, c.logTail())
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("the data image is not inserted=%v after 3 minutes\n%s", want, c.logTail())
			case <-time.After(time.Second):
			}
		}
	}
	waitStatus(true)
	seen(true, url)
	c.rec.NextPass()
	if err := c.p.DetachDataImage(ctx); err != nil {
		c.t.Fatalf("detach the data image: %v\n%s", err, c.logTail())
	}
	waitStatus(false)
	seen(false, "")
	c.check("data-image", goldenDataImage)
}

// service is BMO's servicing state, as prepare is its preparing state.
func (c *client) service(data bmo.ServicingData) func(context.Context) (bmo.Result, error) {
	unprepared := true
	return func(ctx context.Context) (bmo.Result, error) {
		r, started, err := c.p.Service(ctx, data, unprepared, false)
		if started {
			unprepared = false
		}
		return r, err
	}
}

// changedSetting picks a writable BIOS setting with another allowed value,
// and that value.
func changedSetting(t *testing.T, settings map[string]bmo.FirmwareSetting) (string, string) {
	t.Helper()
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := settings[n]
		if s.ReadOnly {
			continue
		}
		for _, v := range s.AllowableValues {
			if v != s.Value {
				return n, v
			}
		}
	}
	// A BIOS that lists nothing yet (fake-hardware's, until a setting is
	// applied): a setting of Redfish's common names.
	return "ProcVirtualization", "Enabled"
}

func settingValues(settings map[string]bmo.FirmwareSetting) map[string]string {
	out := make(map[string]string, len(settings))
	for n, s := range settings {
		out[n] = s.Value
	}
	return out
}

// prepare is BMO's preparing state: Prepare with the host unprepared
// until a manual clean starts (or there is nothing to do), then as BMO
// calls it once the host's status records the configuration.
func (c *client) prepare(data bmo.PrepareData) func(context.Context) (bmo.Result, error) {
	unprepared := true
	return func(ctx context.Context) (bmo.Result, error) {
		r, started, err := c.p.Prepare(ctx, data, unprepared, false)
		if started {
			unprepared = false
		}
		return r, err
	}
}

// TestBMOHostLifecycle runs a fake-hardware host through every phase BMO
// drives: register, firmware settings, inspect, prepare, provision (a raw
// image and a JSON config drive with network_data, written by the agent),
// the steady-state registration pass, soft power off, power on,
// deprovision (automated cleaning), power off and delete. A simulated
// agent boots whenever the node waits for one.
func TestBMOHostLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stack is not started")
	}
	const mac = "52:54:00:3a:00:01"
	img := newImageServer(t, 8<<20)
	h := &bmo.Host{Namespace: "metal3", Name: "worker-0", UID: "6f5d6a2c-3f0b-4c1e-9d55-0a1b2c3d4e01",
		BMCAddress: "fake://metal3-worker-0", BMCUsername: "admin", BMCPassword: "password",
		BootMACAddress: mac, BootMode: "UEFI", CPUArchitecture: "x86_64", AutomatedCleaningMode: "metadata",
		Image:          bmo.Image{URL: img.URL + "/disk.raw", Checksum: img.sha256, ChecksumType: "sha256", DiskFormat: "raw"},
		RootDeviceName: "/dev/vda",
		UserData:       "#cloud-config\nhostname: worker-0\n",
		NetworkData: map[string]any{
			"links":    []any{map[string]any{"id": "enp1s0", "type": "phy", "ethernet_mac_address": mac}},
			"networks": []any{map[string]any{"id": "net0", "link": "enp1s0", "type": "ipv4_dhcp"}},
			"services": []any{},
		}}
	c := newClient(t, h)
	c.initAndRegister(mac)
	startMachine(t, h.ProvisioningID, mac)
	// Metal3's Ironic makes direct its default deploy interface (BMO
	// leaves deploy_interface unset for a disk image); ironflow's
	// fake-hardware defaults to fake, so the operator sets direct: the
	// simulated agent then writes the image and the config drive.
	operatorPatch(t, h.ProvisioningID, map[string]any{"op": "add", "path": "/deploy_interface", "value": "direct"})

	ctx := ctxFor(t, time.Minute)
	settings, err := c.p.GetFirmwareSettings(ctx, true)
	if err != nil {
		t.Fatalf("firmware settings: %v", err)
	}
	comps, err := c.p.GetFirmwareComponents(ctx)
	if err != nil {
		t.Fatalf("firmware components: %v", err)
	}
	c.check("firmware-settings", goldenFirmware)
	t.Logf("firmware: %d BIOS settings, %d components", len(settings), len(comps))

	if ok, err := c.p.HasCapacity(ctx, 20); err != nil || !ok {
		t.Fatalf("HasCapacity: %v %v", ok, err)
	}
	var details *bmo.HardwareDetails
	c.run("inspect", 3*time.Minute, func(ctx context.Context) (bmo.Result, error) {
		r, d, err := c.p.InspectHardware(ctx, false)
		details = d
		return r, err
	})
	c.check("inspect", goldenInspect)
	checkDetails(t, details, mac)

	// BMO's prepare with the host's spec asking for a RAID volume, a BIOS
	// setting and a firmware update: the target RAID configuration, then a
	// manual clean with BMO's steps, waited for to manageable.
	name, value := changedSetting(t, settings)
	size := 10
	data := bmo.PrepareData{
		TargetRAIDConfig:         &bmo.RAIDConfig{HardwareRAIDVolumes: []bmo.HardwareRAIDVolume{{SizeGibibytes: &size, Level: "1", Name: "root"}}},
		ActualFirmwareSettings:   settingValues(settings),
		TargetFirmwareSettings:   map[string]string{name: value},
		TargetFirmwareComponents: []bmo.FirmwareUpdate{{Component: "bios", URL: img.URL + "/bios-2.0.bin"}},
	}
	c.run("prepare", 3*time.Minute, c.prepare(data))
	c.check("prepare", goldenPrepareManualClean)
	n := operatorGet(t, h.ProvisioningID)
	if n["provision_state"] != "manageable" || fmt.Sprint(n["target_raid_config"]) == "map[]" {
		t.Errorf("after BMO's manual clean: %v, target_raid_config %v", n["provision_state"], n["target_raid_config"])
	}
	after, err := c.p.GetFirmwareSettings(ctxFor(t, time.Minute), false)
	if err != nil || after[name].Value != value {
		t.Errorf("BIOS setting %s after the clean: %+v, %v; want %q", name, after[name], err, value)
	}
	c.rec.Take()
	// Prepared: another pass finds nothing to do.
	c.run("prepare", time.Minute, c.prepare(bmo.PrepareData{}))
	c.check("prepare", goldenPrepare)

	if ok, err := c.p.HasCapacity(ctx, 20); err != nil || !ok {
		t.Fatalf("HasCapacity: %v %v", ok, err)
	}
	c.run("provision", 5*time.Minute, c.p.Provision)
	c.check("provision", goldenProvision)
	t.Logf("provision: %s", waitConfigDriveWritten(t, h.ProvisioningID))
	c.run("register-active", time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.Register(ctx, false) })
	c.check("register-active", goldenRegisterSteady)

	// BMO's host update on the provisioned host: a changed BIOS setting
	// is a servicing with BMO's step, through to active again.
	current, err := c.p.GetFirmwareSettings(ctxFor(t, time.Minute), false)
	if err != nil {
		t.Fatal(err)
	}
	c.rec.Take()
	svc := bmo.ServicingData{ActualFirmwareSettings: settingValues(current), TargetFirmwareSettings: map[string]string{name: "Disabled"}, HasFirmwareSpec: true}
	c.run("service", 3*time.Minute, c.service(svc))
	c.check("service", goldenService)
	if after, err := c.p.GetFirmwareSettings(ctxFor(t, time.Minute), false); err != nil || after[name].Value != "Disabled" {
		t.Errorf("BIOS setting %s after servicing: %+v, %v; want Disabled", name, after[name], err)
	}
	c.rec.Take()

	c.run("power-off", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, true, false) })
	for _, call := range c.check("power-off", goldenSoftPowerOff) {
		if call.Method == "PUT" {
			t.Logf("power-off: %v answered %d", call.Body, call.Status)
		}
	}
	c.run("power-on", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOn(ctx, false) })
	c.check("power-on", goldenPowerOn)

	if ok, err := c.p.HasCapacity(ctx, 20); err != nil || !ok {
		t.Fatalf("HasCapacity: %v %v", ok, err)
	}
	c.run("deprovision", 5*time.Minute, c.p.Deprovision)
	c.check("deprovision", goldenDeprovision)

	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", goldenPowerOffBeforeDelete)
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteAvailable)
	t.Logf("simulated agent boots: %d", machineBoots(h.ProvisioningID))
}

// checkDetails: the inventory decoded into BMO's types and gave the
// details BMO would store: memory, a CPU, disks, the boot NIC with PXE.
func checkDetails(t *testing.T, d *bmo.HardwareDetails, mac string) {
	t.Helper()
	if d == nil {
		t.Fatal("inspection ended without hardware details")
	}
	if d.PluginDataError != "" {
		t.Errorf("plugin_data does not decode as Ironic's standard inspection data: %s", d.PluginDataError)
	}
	if d.RAMMebibytes <= 0 || d.CPU.Count <= 0 || d.CPU.Arch == "" || len(d.Storage) == 0 {
		t.Errorf("hardware details lack memory, CPU or disks: %+v", d)
	}
	var boot *bmo.NIC
	for i, n := range d.NIC {
		if strings.EqualFold(n.MAC, mac) {
			boot = &d.NIC[i]
		}
	}
	if boot == nil {
		t.Fatalf("no NIC with the boot MAC %s in %+v", mac, d.NIC)
	}
	t.Logf("hardware details: %d MiB, %d CPUs %s, %d disks, %d NICs", d.RAMMebibytes, d.CPU.Count, d.CPU.Arch, len(d.Storage), len(d.NIC))
	t.Run("pxe-flag", func(t *testing.T) {
		if d.AllInterfaces == 0 {
			t.Fatal("plugin_data has no all_interfaces (Ironic's validate-interfaces hook fills it, with pxe_enabled): BMO would show no NIC as PXE")
		}
		if !boot.PXE {
			t.Errorf("NIC %s (the boot MAC) is not PXE enabled in plugin_data's all_interfaces", boot.Name)
		}
	})
}

// TestBMOExternallyProvisioned: a host registered as externally
// provisioned is adopted (manageable → adopt → active), powered on, then
// deleted from active through maintenance.
func TestBMOExternallyProvisioned(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stack is not started")
	}
	const mac = "52:54:00:3a:00:02"
	h := &bmo.Host{Namespace: "metal3", Name: "ext-0", UID: "6f5d6a2c-3f0b-4c1e-9d55-0a1b2c3d4e02",
		BMCAddress: "fake://metal3-ext-0", BMCUsername: "admin", BMCPassword: "password",
		BootMACAddress: mac, BootMode: "UEFI", CPUArchitecture: "x86_64", AutomatedCleaningMode: "metadata"}
	c := newClient(t, h)
	c.initAndRegister(mac)

	c.adopt(2 * time.Minute)

	c.run("power-on", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOn(ctx, false) })
	c.check("power-on", []want{get("/v1/nodes/{node}"), withOptional(power("power on")), withOptional(pollNode)})

	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", []want{get("/v1/nodes/{node}"), power("power off"), pollNode})
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteActive)
}

// TestBMOHTTPBasic: BMO's http_basic (its ironic-auth secret) reaches the
// API; without credentials, as BMO without the secret (noauth), version
// discovery still answers but the drivers list is refused with 401, so
// TryInit fails.
func TestBMOHTTPBasic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stack is not started")
	}
	h := &bmo.Host{Namespace: "metal3", Name: "auth-0", BMCAddress: "fake://metal3-auth-0"}
	for _, tc := range []struct {
		user, password string
		status         int
	}{{apiUser, apiPassword, 0}, {"", "", 401}, {apiUser, "wrong", 401}} {
		p, err := bmo.New(bmo.Config{Endpoint: stack.APIURL + "/v1", Username: tc.user, Password: tc.password}, h)
		if err != nil {
			t.Fatal(err)
		}
		ready, err := p.TryInit(ctxFor(t, time.Minute))
		if got := bmo.StatusOf(err); got != tc.status || (tc.status == 0 && (err != nil || !ready)) {
			t.Errorf("user %q: ready %v, %v (status %d), want status %d", tc.user, ready, err, got, tc.status)
		}
	}
}
