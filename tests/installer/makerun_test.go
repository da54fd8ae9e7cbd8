package installer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/promcheck"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/vbmc"
)

// TestMakeRunInFreshCloneUnder0700Parent is the README's promise as a new
// user on Debian tries it first: `git clone` into a directory whose parent
// is mode 0700 (root's home), then `make run` as root. The embedded
// PostgreSQL must start although its user cannot traverse the parent, and
// the API, the Temporal Web UI and the unmodified baremetal CLI must work,
// found on PATH as the README's first session runs it. make run must also
// have built the agent ramdisk; manual cleaning of a Redfish node on its
// default boot, virtual media, must reach clean wait with the agent ISO
// built and in the BMC's virtual CD; and the ISO must build for secure
// boot too. This machine may have had the Debian packages before;
// TestInstallDepsRunSetWithFakeAptGet shows that make run's set asks for
// them on one that has not.
// Two prebuilt artefacts are lent to the clone to keep the test within
// minutes, both outside what the 0700 parent decides: the Temporal CLI
// (make's bin/temporal, else a `go install` of about a minute) and the
// Debian kernel of the agent ramdisk (.data/kernel, else a download).
// Ports come from ironflow's IRONFLOW_* environment variables so that the
// run does not collide with another ironflow on this machine.
func TestMakeRunInFreshCloneUnder0700Parent(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds it")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: the scenario is make run as root (a clone under /root); run the tests as root")
	}
	temporalCLI := os.Getenv("IRONFLOW_TEMPORAL_BIN")
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git checkout: %v", err)
	}
	repo := strings.TrimSpace(string(root))
	if temporalCLI == "" {
		temporalCLI = filepath.Join(repo, "bin", "temporal")
	}
	if _, err := os.Stat(temporalCLI); err != nil {
		t.Fatalf("the Temporal CLI to lend the clone: %v (make tools, or IRONFLOW_TEMPORAL_BIN)", err)
	}
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}

	home, err := os.MkdirTemp("", "ironflow-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
			_ = os.RemoveAll(home)
		}
	})
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(home, "ironflow")
	if out, err := exec.Command("git", "clone", "--quiet", repo, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(clone, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", temporalCLI, filepath.Join(clone, "bin", "temporal")).CombinedOutput(); err != nil {
		t.Fatalf("lend the Temporal CLI: %v\n%s", err, out)
	}
	if kernel := filepath.Join(repo, ".data", "kernel"); fileExists(filepath.Join(kernel, "vmlinuz")) {
		if err := os.MkdirAll(filepath.Join(clone, ".data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(kernel, filepath.Join(clone, ".data", "kernel")); err != nil {
			t.Fatal(err)
		}
	}

	ports := quietPorts(t, 6)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	uiURL := fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	cmd := exec.Command("make", "run")
	cmd.Dir = clone
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("IRONFLOW_LISTEN=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("IRONFLOW_TEMPORAL_PORT=%d", ports[1]),
		fmt.Sprintf("IRONFLOW_TEMPORAL_UI_PORT=%d", ports[2]),
		fmt.Sprintf("IRONFLOW_CODEC_LISTEN=127.0.0.1:%d", ports[3]),
		fmt.Sprintf("IRONFLOW_BOOT_LISTEN=127.0.0.1:%d", ports[4]),
		fmt.Sprintf("IRONFLOW_METRICS_LISTEN=127.0.0.1:%d", ports[5]),
	)
	for _, drop := range []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "IRONFLOW_TEMPORAL_ADDRESS", "IRONFLOW_DATABASE_URL"} {
		cmd.Env = append(cmd.Env, drop+"=")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(home, "make-run.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(logFile, pw), io.MultiWriter(logFile, pw)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed when make run has ended, waitErr then says how;
	// both the wait for readiness and the cleanup read it. WaitDelay
	// bounds the wait for a process that left make's group and still
	// holds its output open.
	cmd.WaitDelay = 10 * time.Second
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		// Ctrl-C, as the README says to stop it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Errorf("make run (process group %d) did not end 30 s after SIGKILL", cmd.Process.Pid)
			}
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ironflow is running") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("make run exited before ironflow ran: %v\n%s", waitErr, embedded.Tail(logPath, 6000))
	case <-time.After(15 * time.Minute):
		t.Fatalf("make run not running after 15 minutes\n%s", embedded.Tail(logPath, 6000))
	}
	t.Logf("make run in a fresh clone under a 0700 parent: running after %s", time.Since(start).Round(time.Second))

	if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the clone's parent is no longer 0700 (%v, %v): make run must not loosen it", st.Mode(), err)
	}
	// The path the README's PostgreSQL row promises: the
	// postgres user cannot traverse the 0700 parent, so PostgreSQL runs as
	// root mapped to it in a user namespace (embedded/postgres.go).
	if runLog, _ := os.ReadFile(logPath); !strings.Contains(string(runLog), "in a user namespace") || !strings.Contains(string(runLog), "postgres started") {
		t.Errorf("make run's log does not show PostgreSQL started in a user namespace:\n%s", embedded.Tail(logPath, 4000))
	}
	if !fileExists(filepath.Join(clone, ".data", "pg", "PG_VERSION")) && !dirHasPGVersion(filepath.Join(clone, ".data", "pg")) {
		t.Errorf("no PostgreSQL cluster under the clone's .data/pg")
	}

	// The API.
	var apiRoot struct {
		Versions []struct {
			ID string `json:"id"`
		} `json:"versions"`
	}
	if code := getJSON(t, apiURL+"/", &apiRoot); code != 200 || len(apiRoot.Versions) == 0 {
		t.Fatalf("API root: %d %+v\n%s", code, apiRoot, embedded.Tail(logPath, 4000))
	}
	// The baremetal CLI, as the banner says: make run installed it.
	baremetal, err := exec.LookPath("baremetal")
	if err != nil {
		t.Fatalf("after make run, the README's first session finds no baremetal command: %v\n%s", err, embedded.Tail(logPath, 4000))
	}
	bm := func(args ...string) string {
		t.Helper()
		c := exec.Command(baremetal, args...)
		c.Env = append(os.Environ(), "OS_ENDPOINT="+apiURL, "OS_AUTH_TYPE=none")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("baremetal %s: %v\n%s\nmake run:\n%s", strings.Join(args, " "), err, out, embedded.Tail(logPath, 4000))
		}
		return string(out)
	}
	bm("node", "create", "--driver", "fake-hardware", "--name", "fresh-clone-node-7d1")
	if out := bm("node", "list", "-f", "value", "-c", "Name"); !strings.Contains(out, "fresh-clone-node-7d1") {
		t.Errorf("baremetal node list does not show the node just created:\n%s", out)
	}
	if out := bm("node", "manage", "fresh-clone-node-7d1", "--wait", "60"); out != "" {
		t.Logf("manage: %s", out)
	}
	if out := bm("node", "show", "fresh-clone-node-7d1", "-f", "value", "-c", "provision_state"); strings.TrimSpace(out) != "manageable" {
		t.Errorf("after manage (a Temporal workflow): provision_state %q", strings.TrimSpace(out))
	}
	// The metrics, where make run's banner says (docs/metrics.md).
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[5])
	if runLog, _ := os.ReadFile(logPath); !strings.Contains(string(runLog), "Metrics      "+metricsURL+" ") {
		t.Errorf("make run's banner does not name the metrics address %s:\n%s", metricsURL, embedded.Tail(logPath, 4000))
	}
	checkMetrics(t, metricsURL, `ironflow_nodes{conductor_group="",provision_state="manageable"} 1`)
	// The Temporal Web UI: its page, and its API reading the dev server.
	resp, err := http.Get(uiURL + "/")
	if err != nil {
		t.Fatalf("Web UI: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(page)), "<html") {
		t.Errorf("Web UI page: %d %.200s", resp.StatusCode, page)
	}
	var ns struct {
		Namespaces []struct {
			NamespaceInfo struct {
				Name string `json:"name"`
			} `json:"namespaceInfo"`
		} `json:"namespaces"`
	}
	if code := getJSON(t, uiURL+"/api/v1/namespaces", &ns); code != 200 {
		t.Errorf("Web UI API: %d", code)
	}
	found := false
	for _, n := range ns.Namespaces {
		found = found || n.NamespaceInfo.Name == "default"
	}
	if !found {
		t.Errorf("the Web UI lists no namespace default: %+v", ns)
	}
	var wfs struct {
		Executions []json.RawMessage `json:"executions"`
	}
	if code := getJSON(t, uiURL+"/api/v1/namespaces/default/workflows", &wfs); code != 200 || len(wfs.Executions) == 0 {
		t.Errorf("the Web UI lists no workflow after manage: %d, %d executions", code, len(wfs.Executions))
	}

	// The agent ramdisk, which virtual media and PXE boot.
	if runLog, _ := os.ReadFile(logPath); strings.Contains(string(runLog), "ramdisk could not be built") {
		t.Errorf("make run did not build the agent ramdisk:\n%s", embedded.Tail(logPath, 4000))
	}

	// Manual cleaning of a Redfish node on its default boot, virtual
	// media: the worker builds the agent ISO from the ramdisk make run
	// built and the host's boot loaders, and the BMC (ironflow's vbmc on a
	// QEMU VM without a network) fetches it from the boot service. The
	// agent cannot call back, so cleaning waits in clean wait; that is
	// where a missing boot loader used to fail it.
	rf := startRedfishVM(t, home)
	bm("node", "create", "--driver", "redfish", "--name", "fresh-clone-rf-7d1",
		"--driver-info", "redfish_address="+rf.url, "--driver-info", "redfish_system_id=/redfish/v1/Systems/rf0",
		"--driver-info", "redfish_username=admin", "--driver-info", "redfish_password=password")
	rfUUID := strings.TrimSpace(bm("node", "show", "fresh-clone-rf-7d1", "-f", "value", "-c", "uuid"))
	if out := bm("node", "show", rfUUID, "-f", "value", "-c", "boot_interface"); strings.TrimSpace(out) != "redfish-virtual-media" {
		t.Errorf("a Redfish node's default boot interface is %q, want redfish-virtual-media", strings.TrimSpace(out))
	}
	bm("node", "manage", rfUUID, "--wait", "120")
	bm("node", "clean", rfUUID, "--clean-steps", `[{"interface": "deploy", "step": "erase_devices_metadata"}]`)
	cleanStart := time.Now()
	var rfNode struct {
		ProvisionState string  `json:"provision_state"`
		LastError      *string `json:"last_error"`
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out := bm("node", "show", rfUUID, "-f", "json", "-c", "provision_state", "-c", "last_error")
		if err := json.Unmarshal([]byte(out), &rfNode); err != nil {
			t.Fatalf("baremetal node show -f json: %v\n%s", err, out)
		}
		if rfNode.ProvisionState == "clean wait" || rfNode.ProvisionState == "clean failed" {
			break
		}
	}
	if rfNode.ProvisionState != "clean wait" || rfNode.LastError != nil {
		lastError := ""
		if rfNode.LastError != nil {
			lastError = *rfNode.LastError
		}
		t.Errorf("manual cleaning of a Redfish node on virtual media: %s, last_error %q\nvbmc:\n%s\nmake run:\n%s",
			rfNode.ProvisionState, lastError, embedded.Tail(rf.log, 3000), embedded.Tail(logPath, 4000))
	} else {
		t.Logf("manual cleaning of a Redfish node on virtual media: clean wait after %s", time.Since(cleanStart).Round(time.Second))
		if !fileExists(filepath.Join(clone, ".data", "iso", rfUUID+".iso")) {
			t.Errorf("in clean wait, but no agent ISO in the clone's .data/iso")
		}
		if size := rf.insertedISO(t); size == 0 {
			t.Errorf("the BMC holds no ISO9660 image in its virtual CD\nvbmc:\n%s", embedded.Tail(rf.log, 3000))
		} else {
			t.Logf("the BMC's virtual CD holds the agent ISO, %d MiB", size>>20)
		}
		bm("node", "abort", rfUUID)
	}

	// The agent ISO, from the ramdisk make run built, as the worker builds
	// it for a virtual-media boot (cmd/ironflow's isoService), plain and
	// for secure boot.
	images := filepath.Join(clone, ".data", "images")
	isos := pxe.AgentISOs{Dir: filepath.Join(home, "iso")}
	for _, secure := range []bool{false, true} {
		p, err := isos.Build(context.Background(), filepath.Join(images, "agent.kernel"), filepath.Join(images, "agent.initramfs"),
			pxe.ISOParams{NodeUUID: "0b5e6f4a-8c1d-4e2f-9a3b-7c6d5e4f3a2b", APIURL: apiURL, AgentToken: "fresh-clone-token", SecureBoot: secure})
		if err != nil {
			t.Errorf("agent ISO (secure boot %v) after make run: %v", secure, err)
			continue
		}
		iso, err := os.Stat(p)
		initrd, err2 := os.Stat(filepath.Join(images, "agent.initramfs"))
		if err != nil || err2 != nil || iso.Size() <= initrd.Size() {
			t.Errorf("agent ISO (secure boot %v) %s: %v, %v: no larger than the initramfs it carries", secure, p, err, err2)
		} else {
			t.Logf("agent ISO (secure boot %v) from make run's ramdisk: %d MiB", secure, iso.Size()>>20)
		}
	}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Errorf("GET %s: %v: %.300s", url, err, body)
		}
	}
	return resp.StatusCode
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// dirHasPGVersion reports whether a PostgreSQL cluster (PG_VERSION) lies
// somewhere under dir (package embedded may keep it one level down).
func dirHasPGVersion(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "PG_VERSION" {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// redfishVM is ironflow's virtual BMC (Redfish) in front of one QEMU VM,
// rf0, with no network: enough for ironflow to power it and insert
// virtual media, which the BMC downloads as a real one does.
type redfishVM struct {
	url, log, stateDir string
}

func startRedfishVM(t *testing.T, dir string) *redfishVM {
	t.Helper()
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: make test installs it (scripts/install-deps.sh test)", bin)
		}
	}
	rf := &redfishVM{log: filepath.Join(dir, "vbmc.log"), stateDir: filepath.Join(dir, "vbmc")}
	cfg, _ := json.Marshal(map[string]any{
		"state_dir": rf.stateDir, "username": "admin", "password": "password",
		"vms": []map[string]any{{"name": "rf0", "mac": "52:54:00:7d:10:01", "disk": filepath.Join(dir, "rf0.raw"),
			"disk_size": "16M", "memory_mb": 256, "firmware": "bios", "netdev": "none"}},
	})
	cfgPath := filepath.Join(dir, "vbmc.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(rf.log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(vc, slog.New(slog.NewTextHandler(logFile, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); logFile.Close() })
	rf.url = hs.URL
	return rf
}

// insertedISO is the size of the ISO9660 image (its volume descriptor,
// "CD001" at byte 0x8001) in the BMC's virtual CD, 0 if it holds none.
func (rf *redfishVM) insertedISO(t *testing.T) int64 {
	t.Helper()
	var found int64
	_ = filepath.WalkDir(rf.stateDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".iso") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		magic := make([]byte, 5)
		if _, err := f.ReadAt(magic, 0x8001); err == nil && string(magic) == "CD001" {
			if st, err := f.Stat(); err == nil {
				found = st.Size()
			}
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// checkMetrics scrapes url, lints it with `promtool check metrics` and
// looks for the sample line want.
func checkMetrics(t *testing.T, url, want string) {
	t.Helper()
	body, err := promcheck.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("%s has no %s", url, want)
	}
	switch err := promcheck.Lint(body); {
	case errors.Is(err, promcheck.ErrNoPromtool):
		t.Logf("LOUD: %v: make run's scrape is not linted", err)
	case err != nil:
		t.Errorf("make run's scrape: %v", err)
	}
}

// quietPorts are n distinct ports free on 127.0.0.1 now and below the
// kernel's ephemeral range: make run binds them minutes later, after its
// build, and a port from that range (what a listen on port 0 hands out)
// may by then be the local end of another test's connection or listener.
func quietPorts(t *testing.T, n int) []int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const from = 20000
	if low <= from+n {
		t.Fatalf("the ephemeral port range starts at %d: no room below it for %d ports from %d", low, n, from)
	}
	var ports []int
	for _, p := range rand.Perm(low - from) {
		port := from + p
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		if ports = append(ports, port); len(ports) == n {
			return ports
		}
	}
	t.Fatalf("no %d free ports between %d and %d", n, from, low)
	return nil
}
