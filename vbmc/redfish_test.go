package vbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
)

// testLogger sends the service's logs to the test output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// makeISO builds a small ISO 9660 image with xorriso.
func makeISO(t *testing.T) (dir, name string) {
	t.Helper()
	dir = t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "hello.txt"), []byte("ironflow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-as", "mkisofs", "-quiet", "-V", "IRONFLOW", "-o", filepath.Join(dir, "agent.iso"), src).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v: %s", err, out)
	}
	return dir, "agent.iso"
}

// TestRedfishWithQEMU drives the Redfish service with gofish (the client
// ironflow's redfish driver uses) against a real QEMU VM: session login,
// power, boot override through QMP, virtual media, logout.
func TestRedfishWithQEMU(t *testing.T) {
	requireTools(t, DefaultQEMUBinary, "qemu-img", "xorriso", "pgrep")
	cfg := newTestConfig(t)
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	m := srv.machines["vm0"]

	// Without credentials only the service root answers.
	resp, err := http.Get(ts.URL + "/redfish/v1/Systems")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET Systems without auth: %d, want 401", resp.StatusCode)
	}
	if _, err := gofish.Connect(gofish.ClientConfig{Endpoint: ts.URL, Username: "admin", Password: "wrong"}); err == nil {
		t.Fatal("session login with a wrong password succeeded")
	}

	client, err := gofish.Connect(gofish.ClientConfig{Endpoint: ts.URL, Username: "admin", Password: "password"})
	if err != nil {
		t.Fatalf("session login: %v", err)
	}
	sess, err := client.GetSession()
	if err != nil || sess.Token == "" || !strings.HasPrefix(sess.ID, sessionsPath+"/") {
		t.Fatalf("session after login: %+v, %v", sess, err)
	}
	if n := countSessions(t, ts.URL); n != 1 {
		t.Fatalf("sessions after login: %d, want 1", n)
	}

	system := getSystem(t, client)
	if system.PowerState != redfish.OffPowerState {
		t.Fatalf("power state before power on: %s", system.PowerState)
	}
	if system.Boot.BootSourceOverrideMode != redfish.LegacyBootSourceOverrideMode {
		t.Errorf("boot mode: %q, want Legacy", system.Boot.BootSourceOverrideMode)
	}
	nics, err := system.EthernetInterfaces()
	if err != nil || len(nics) != 1 || nics[0].MACAddress != "52:54:00:00:00:10" {
		t.Fatalf("ethernet interfaces: %+v, %v", nics, err)
	}
	if system.MemorySummary.TotalSystemMemoryGiB != 0.25 || system.ProcessorSummary.Count != 1 {
		t.Errorf("memory/processor summary: %+v %+v", system.MemorySummary, system.ProcessorSummary)
	}

	// Media inserted while off is in the drive when the machine starts.
	isoDir, isoName := makeISO(t)
	isoSrv := httptest.NewServer(http.FileServer(http.Dir(isoDir)))
	t.Cleanup(isoSrv.Close)
	image := isoSrv.URL + "/" + isoName
	if err := getCD(t, client).InsertMedia(image, true, true); err != nil {
		t.Fatalf("insert media while off: %v", err)
	}

	// Power on: a QEMU process with this VM's monitor, and QMP says running.
	if err := system.Reset(redfish.OnResetType); err != nil {
		t.Fatalf("reset On: %v", err)
	}
	pid := m.pid()
	if pid == 0 {
		t.Fatal("no QEMU process after power on")
	}
	if st := queryStatus(t, m); st != "running" {
		t.Fatalf("QMP status after power on: %s", st)
	}
	if file := queryCD(t, m); file == "" {
		t.Fatal("media inserted while off is not in the CD drive after power on")
	}
	if err := getCD(t, client).EjectMedia(); err != nil {
		t.Fatalf("eject media: %v", err)
	}
	waitLogContains(t, cfg.VMs[0].SerialLog, "SeaBIOS")
	// On again is a no-op, not a second QEMU.
	if err := getSystem(t, client).Reset(redfish.OnResetType); err != nil {
		t.Fatalf("second reset On: %v", err)
	}
	if m.pid() != pid {
		t.Fatalf("second power on replaced QEMU: pid %d -> %d", pid, m.pid())
	}
	system = getSystem(t, client)
	if system.PowerState != redfish.OnPowerState {
		t.Fatalf("power state after power on: %s", system.PowerState)
	}
	before := bootIndexes(t, m)
	if first(before) != "disk0" {
		t.Fatalf("default boot order starts with %s, want disk0: %v", first(before), before)
	}

	// Boot override Pxe Once: the running VM's boot order changes now.
	if err := system.SetBoot(redfish.Boot{
		BootSourceOverrideTarget:  redfish.PxeBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}); err != nil {
		t.Fatalf("set boot Pxe Once: %v", err)
	}
	after := bootIndexes(t, m)
	if first(after) != "net0" || after["net0"] == before["net0"] {
		t.Fatalf("boot order after Pxe override: %v (before %v), want net0 first", after, before)
	}
	system = getSystem(t, client)
	if system.Boot.BootSourceOverrideTarget != redfish.PxeBootSourceOverrideTarget ||
		system.Boot.BootSourceOverrideEnabled != redfish.OnceBootSourceOverrideEnabled {
		t.Fatalf("boot read back: %+v", system.Boot)
	}
	// The reset boots from the network once; then the override is spent.
	if err := system.Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatalf("reset ForceRestart: %v", err)
	}
	system = getSystem(t, client)
	if system.Boot.BootSourceOverrideEnabled != redfish.DisabledBootSourceOverrideEnabled {
		t.Fatalf("Once override after a reset: %+v, want Disabled", system.Boot)
	}
	if idx := bootIndexes(t, m); first(idx) != "disk0" {
		t.Fatalf("boot order after the Once override was used: %v, want disk0 first", idx)
	}
	// The boot mode is the firmware of the next start (bios.go): a BIOS
	// VM may be switched to UEFI and back; other modes are refused.
	if err := system.SetBoot(redfish.Boot{BootSourceOverrideMode: "Efi"}); err == nil {
		t.Fatal("boot mode Efi accepted")
	}
	for _, mode := range []redfish.BootSourceOverrideMode{redfish.UEFIBootSourceOverrideMode, redfish.LegacyBootSourceOverrideMode} {
		if err := system.SetBoot(redfish.Boot{BootSourceOverrideMode: mode}); err != nil {
			t.Fatalf("switch boot mode to %s: %v", mode, err)
		}
		if system = getSystem(t, client); system.Boot.BootSourceOverrideMode != mode {
			t.Fatalf("boot mode %q after switching to %s", system.Boot.BootSourceOverrideMode, mode)
		}
	}

	// Virtual media: the BMC downloads the ISO and QEMU gets it in its CD drive.
	cd := getCD(t, client)
	if cd.Inserted || len(cd.MediaTypes) != 2 {
		t.Fatalf("virtual CD before insert: %+v", cd)
	}
	if err := cd.InsertMedia(image, true, true); err != nil {
		t.Fatalf("insert media: %v", err)
	}
	file := queryCD(t, m)
	if file == "" || !strings.HasPrefix(file, m.mediaDir()) {
		t.Fatalf("CD drive after insert: %q, want a file under %s", file, m.mediaDir())
	}
	got, _ := os.ReadFile(file)
	want, _ := os.ReadFile(filepath.Join(isoDir, isoName))
	if !bytes.Equal(got, want) {
		t.Fatal("the CD image QEMU reads differs from the served ISO")
	}
	if cd = getCD(t, client); !cd.Inserted || cd.Image != image {
		t.Fatalf("virtual CD after insert: inserted %v image %q", cd.Inserted, cd.Image)
	}
	// Only loopback and the lab networks: nothing is fetched from elsewhere.
	if err := cd.InsertMedia("http://192.0.2.1/agent.iso", true, true); err == nil {
		t.Fatal("insert media from a non-lab address succeeded")
	}
	if err := cd.EjectMedia(); err != nil {
		t.Fatalf("eject media: %v", err)
	}
	if file := queryCD(t, m); file != "" {
		t.Fatalf("CD drive after eject: %q", file)
	}
	if cd = getCD(t, client); cd.Inserted {
		t.Fatal("virtual CD reads back inserted after eject")
	}

	// No OS answers ACPI: a graceful shutdown leaves the machine on, as on
	// a real server. An NMI is delivered without harm.
	for _, rt := range []redfish.ResetType{redfish.GracefulShutdownResetType, redfish.NmiResetType} {
		if err := getSystem(t, client).Reset(rt); err != nil {
			t.Fatalf("reset %s: %v", rt, err)
		}
		if m.pid() != pid {
			t.Fatalf("reset %s changed the QEMU process", rt)
		}
	}
	// PowerCycle: a new QEMU process.
	if err := getSystem(t, client).Reset(redfish.PowerCycleResetType); err != nil {
		t.Fatalf("reset PowerCycle: %v", err)
	}
	if processAlive(pid) || m.pid() == 0 {
		t.Fatalf("after PowerCycle: old pid %d alive %v, new pid %d", pid, processAlive(pid), m.pid())
	}
	pid = m.pid()

	// ForceOff: the process is gone.
	if err := getSystem(t, client).Reset(redfish.ForceOffResetType); err != nil {
		t.Fatalf("reset ForceOff: %v", err)
	}
	if processAlive(pid) || m.pid() != 0 {
		t.Fatalf("QEMU pid %d still alive after ForceOff", pid)
	}
	if s := getSystem(t, client); s.PowerState != redfish.OffPowerState {
		t.Fatalf("power state after ForceOff: %s", s.PowerState)
	}

	client.Logout()
	if n := countSessions(t, ts.URL); n != 0 {
		t.Fatalf("sessions after logout: %d, want 0", n)
	}
	// The token is dead.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/redfish/v1/Systems", nil)
	req.Header.Set(authTokenHeader, sess.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET with a logged-out token: %d, want 401", resp.StatusCode)
	}
}

func getSystem(t *testing.T, c *gofish.APIClient) *redfish.ComputerSystem {
	t.Helper()
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems: %d, %v", len(systems), err)
	}
	return systems[0]
}

func getCD(t *testing.T, c *gofish.APIClient) *redfish.VirtualMedia {
	t.Helper()
	managers, err := c.Service.Managers()
	if err != nil || len(managers) != 1 {
		t.Fatalf("managers: %d, %v", len(managers), err)
	}
	media, err := managers[0].VirtualMedia()
	if err != nil || len(media) != 1 {
		t.Fatalf("virtual media: %d, %v", len(media), err)
	}
	return media[0]
}

// countSessions reads Members@odata.count of the session collection with
// basic auth, which opens no session of its own.
func countSessions(t *testing.T, base string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+sessionsPath, nil)
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Count int `json:"Members@odata.count"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET sessions: %d %s", resp.StatusCode, b)
	}
	return body.Count
}

// TestRedfishRequests covers request handling that needs no VM: auth,
// errors, and the boot override state machine on a powered-off system.
func TestRedfishRequests(t *testing.T) {
	cfg := newTestConfig(t)
	srv, ts := serveRedfish(t, cfg)

	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		auth     bool
		header   map[string]string
		wantCode int
		wantBody string
	}{
		{"root is open", "GET", "/redfish/v1/", "", false, nil, 200, `"Sessions"`},
		{"root without slash", "GET", "/redfish/v1", "", false, nil, 200, `"RedfishVersion"`},
		{"systems need auth", "GET", "/redfish/v1/Systems", "", false, nil, 401, "NoValidSession"},
		{"systems with basic auth", "GET", "/redfish/v1/Systems/", "", true, nil, 200, `"/redfish/v1/Systems/vm0"`},
		{"unknown system", "GET", "/redfish/v1/Systems/nope", "", true, nil, 404, "ResourceMissingAtURI"},
		{"bad reset type", "POST", "/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", `{"ResetType":"Explode"}`, true, nil, 400, "ActionParameterValueNotInList"},
		{"bad boot target", "PATCH", "/redfish/v1/Systems/vm0", `{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, true, nil, 400, "PropertyValueNotInList"},
		{"read-only property", "PATCH", "/redfish/v1/Systems/vm0", `{"PowerState":"On"}`, true, nil, 400, "PropertyNotWritable"},
		{"stale etag", "PATCH", "/redfish/v1/Systems/vm0", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, true, map[string]string{"If-Match": `W/"00000000"`}, 412, "PreconditionFailed"},
		{"boot Cd continuous while off", "PATCH", "/redfish/v1/Systems/vm0", `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Continuous"}}`, true, nil, 200, `"BootSourceOverrideTarget": "Cd"`},
		{"disable override", "PATCH", "/redfish/v1/Systems/vm0", `{"Boot":{"BootSourceOverrideEnabled":"Disabled"}}`, true, nil, 200, `"BootSourceOverrideTarget": "None"`},
		{"target alone means once", "PATCH", "/redfish/v1/Systems/vm0", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, true, nil, 200, `"BootSourceOverrideEnabled": "Once"`},
		{"media scheme refused", "POST", "/redfish/v1/Managers/vm0/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"file:///etc/passwd"}`, true, nil, 400, "not http or https"},
		{"eject when empty", "POST", "/redfish/v1/Managers/vm0/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", `{}`, true, nil, 204, ""},
		{"graceful shutdown while off", "POST", "/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", `{"ResetType":"GracefulShutdown"}`, true, nil, 204, ""},
		{"chassis", "GET", "/redfish/v1/Chassis/vm0", "", true, nil, 200, `"PowerState": "Off"`},
		{"no floppy", "GET", "/redfish/v1/Managers/vm0/VirtualMedia/Floppy", "", true, nil, 404, "ResourceMissingAtURI"},
		{"malformed reset", "POST", "/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", `{"ResetType":`, true, nil, 400, "MalformedJSON"},
		{"login with wrong password", "POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"admin","Password":"nope"}`, false, nil, 401, "InvalidCredentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			if tc.auth {
				req.SetBasicAuth("admin", "password")
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantBody) {
				t.Fatalf("%s %s: %d %s, want %d containing %q", tc.method, tc.path, resp.StatusCode, b, tc.wantCode, tc.wantBody)
			}
		})
	}
	if m := srv.machines["vm0"]; m.pid() != 0 {
		t.Fatal("a request without a power action started QEMU")
	}
}

func TestQEMUBootOrderArgs(t *testing.T) {
	cfg := Config{StateDir: "/tmp/x", Password: "p", VMs: []VM{{Name: "vm0", MAC: "52:54:00:00:00:10", Disk: "/tmp/x/d.raw"}}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	noDisk := cfg
	noDisk.VMs = []VM{cfg.VMs[0]}
	noDisk.VMs[0].Disk = ""
	tests := []struct {
		target string
		cfg    *Config
		want   []string
	}{
		{BootTargetNone, &cfg, []string{"virtio-blk-pci,id=disk0,drive=disk0drive,bootindex=1", "virtio-net-pci,id=net0,mac=52:54:00:00:00:10,bootindex=2", "ide-cd,id=cd0,drive=cd0drive,bus=ide.0,bootindex=3"}},
		{BootTargetPxe, &cfg, []string{"virtio-net-pci,id=net0,mac=52:54:00:00:00:10,bootindex=1", "bootindex=2", "ide-cd,id=cd0,drive=cd0drive,bus=ide.0,bootindex=3"}},
		{BootTargetCd, &cfg, []string{"ide-cd,id=cd0,drive=cd0drive,bus=ide.0,bootindex=1", "virtio-blk-pci,id=disk0,drive=disk0drive,bootindex=2", "virtio-net-pci,id=net0,mac=52:54:00:00:00:10,bootindex=3"}},
		{BootTargetHdd, &noDisk, []string{"virtio-net-pci,id=net0,mac=52:54:00:00:00:10,bootindex=1", "ide-cd,id=cd0,drive=cd0drive,bus=ide.0,bootindex=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			m := newMachine(tc.cfg, tc.cfg.VMs[0], slog.Default())
			args := strings.Join(m.qemuArgs(m.bootOrder(BootOverride{Target: tc.target, Enabled: BootOnce}), ""), " ")
			for _, w := range tc.want {
				if !strings.Contains(args, w) {
					t.Errorf("args lack %q:\n%s", w, args)
				}
			}
			for _, w := range []string{"-device virtio-rng-pci", "-nodefaults", "append=on", "-serial chardev:s0", "-daemonize"} {
				if !strings.Contains(args, w) {
					t.Errorf("args lack %q", w)
				}
			}
		})
	}
}

func TestCheckMediaAddress(t *testing.T) {
	cfg := Config{StateDir: "/tmp/x", Password: "p", MediaNetworks: []string{"192.168.100.0/24"},
		VMs: []VM{{Name: "vm0", MAC: "52:54:00:00:00:10"}}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:8080", true},
		{"192.168.100.7:80", true},
		{"192.168.101.7:80", false},
		{"10.0.0.1:443", false},
		{"[::ffff:127.0.0.1]:80", true},
	}
	for _, tc := range tests {
		err := cfg.checkMediaAddress(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want allowed=%v", tc.addr, err, tc.ok)
		}
	}
}

func TestLoadConfigRejects(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"no state dir", `{"password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01"}]}`, "state_dir"},
		{"no password", `{"state_dir":"/tmp/s","vms":[{"name":"a","mac":"52:54:00:00:00:01"}]}`, "password"},
		{"bad mac", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"zz"}]}`, "mac"},
		{"bad firmware", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","firmware":"coreboot"}]}`, "firmware"},
		{"bad netdev", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","netdev":"bridge"}]}`, "netdev"},
		{"duplicate", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01"},{"name":"a","mac":"52:54:00:00:00:02"}]}`, "twice"},
		{"unknown field", `{"state_dir":"/tmp/s","password":"p","vm":[]}`, "unknown field"},
		{"bad name", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a/b","mac":"52:54:00:00:00:01"}]}`, "name"},
		{"vnc not ip:port", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","vnc_address":"localhost:5901"}]}`, "vnc_address"},
		{"vnc below 5900", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","vnc_address":"127.0.0.1:80"}]}`, "below 5900"},
		{"serial no port", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","serial_address":"127.0.0.1"}]}`, "serial_address"},
		{"console address twice", `{"state_dir":"/tmp/s","password":"p","vms":[{"name":"a","mac":"52:54:00:00:00:01","vnc_address":"127.0.0.1:5901"},{"name":"b","mac":"52:54:00:00:00:02","serial_address":"127.0.0.1:5901"}]}`, "is also vm a's vnc_address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "vms.json")
			if err := os.WriteFile(p, []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestUEFIConsoleAppends powers a UEFI VM on twice under TCG (the mode CI
// without KVM uses) and checks that OVMF writes to the serial log and that
// the second power-on appends to the first one's history.
func TestUEFIConsoleAppends(t *testing.T) {
	requireTools(t, DefaultQEMUBinary, "qemu-img", "pgrep")
	if _, err := os.Stat(OVMFCode); err != nil {
		t.Skipf("SKIP: OVMF is not installed (Debian package ovmf): %v", err)
	}
	cfg := newTestConfigWith(t, func(top, vm map[string]any) {
		top["accel"] = AccelTCG
		vm["firmware"] = FirmwareUEFI
	})
	m := newMachine(&cfg, cfg.VMs[0], testLogger(t))
	ctx := context.Background()
	t.Cleanup(func() { m.ForceOff(context.Background()) })

	var sizes []int64
	for range 2 {
		if err := m.PowerOn(ctx); err != nil {
			t.Fatal(err)
		}
		before := int64(0)
		if len(sizes) > 0 {
			before = sizes[len(sizes)-1]
		}
		size := waitLogGrows(t, cfg.VMs[0].SerialLog, before)
		sizes = append(sizes, size)
		if err := m.ForceOff(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if sizes[1] <= sizes[0] {
		t.Fatalf("console log sizes %v: the second power-on did not append", sizes)
	}
}

// waitLogContains waits (bounded by a generous deadline for a loaded TCG
// host) until the console log holds want.
func waitLogContains(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(want)) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s never showed %q; it holds %q", path, want, b)
}

// waitLogGrows waits (bounded by a generous deadline for a loaded TCG host)
// until the firmware has written past size bytes of the log.
func waitLogGrows(t *testing.T, path string, size int64) int64 {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := os.Stat(path); err == nil && st.Size() > size {
			return st.Size()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not grow past %d bytes", path, size)
	return 0
}

// serveRedfish serves cfg's Redfish on a local test server, both closed
// when the test ends.
func serveRedfish(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return srv, ts
}
