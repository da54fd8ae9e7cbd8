package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/devstack"
	"github.com/ironflow/ironflow/vbmc"
	"github.com/ironflow/ironflow/workflows"
)

// Where ironflow listens inside a lab. Each lab is its own namespace, so
// fixed ports never collide between tests.
const (
	apiListen     = LabAddress + ":6385"
	bootListen    = LabAddress + ":8080"
	tftpListen    = LabAddress + ":69"
	temporalPort  = "7233"
	ipmiSimListen = "127.0.0.1:6230"
	// stackReadyTimeout bounds `ironflow dev` bringing up PostgreSQL,
	// Temporal, the API and PXE services on a loaded machine.
	stackReadyTimeout = 3 * time.Minute
	// ipmiSimReadyTimeout bounds ipmi_sim's start.
	ipmiSimReadyTimeout = 30 * time.Second
	readyPollInterval   = 500 * time.Millisecond
	// vmDiskSize is the VMs' (sparse) disk: the agent, like Ironic's,
	// skips disks under 4 GiB when it picks the root device.
	vmDiskSize = "5G"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	// binDir is the directory of a binary built by the tests, removed
	// when they end.
	binDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ironflowBinary is $IRONFLOW_BIN (make test builds it) or a fresh build.
func ironflowBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if b := os.Getenv("IRONFLOW_BIN"); b != "" {
			if _, err := os.Stat(b); err == nil {
				binPath = b
				return
			}
		}
		dir, err := os.MkdirTemp("", "ironflow-e2e-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "ironflow")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/ironflow")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/ironflow: %w: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// temporalCLI is $IRONFLOW_TEMPORAL_BIN or ./bin/temporal (make tools).
func temporalCLI() string {
	if b := os.Getenv("IRONFLOW_TEMPORAL_BIN"); b != "" {
		return b
	}
	return filepath.Join(RepoRoot(), "bin", "temporal")
}

// agentImages finds the agent kernel and initramfs that `make ramdisk`
// builds: $IRONFLOW_IMAGES_DIR or .data/images (agent.kernel,
// agent.initramfs), else the ramdisk builder's own output in .data/ramdisk.
func agentImages(t testing.TB) (kernel, initramfs string) {
	t.Helper()
	type pair struct{ k, i string }
	var cands []pair
	if d := os.Getenv("IRONFLOW_IMAGES_DIR"); d != "" {
		cands = append(cands, pair{filepath.Join(d, "agent.kernel"), filepath.Join(d, "agent.initramfs")})
	}
	data := filepath.Join(RepoRoot(), ".data")
	cands = append(cands,
		pair{filepath.Join(data, "images", "agent.kernel"), filepath.Join(data, "images", "agent.initramfs")},
		pair{filepath.Join(data, "ramdisk", "vmlinuz"), filepath.Join(data, "ramdisk", "initramfs.cpio.gz")})
	for _, c := range cands {
		if _, err := os.Stat(c.k); err != nil {
			continue
		}
		if _, err := os.Stat(c.i); err == nil {
			return c.k, c.i
		}
	}
	t.Fatalf("no agent ramdisk: run `make ramdisk` (looked for %v)", cands)
	return "", ""
}

// linkOrCopy puts src at dst without changing src.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// stack is `ironflow dev` running inside a lab: API, worker, PXE (DHCP on
// the bridge, TFTP, HTTP boot), embedded PostgreSQL and Temporal.
//
// A split stack (startSplitStack) runs the same parts as separate
// processes instead, so that a scenario can kill one of them.
type stack struct {
	lab       *Lab
	bin       string
	dataDir   string
	imagesDir string
	dev       *Process
	// procs are every ironflow process of the stack, for log tails.
	procs []*Process
	// split stacks only: the worker and how to start it again.
	worker     *Process
	workerArgs []string
	workerRuns int
}

// logTail is the end of every stack process's log, for failure messages.
func (s *stack) logTail() string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "--- %s log tail (%s):\n%s\n", p.Name, p.Log, Tail(p.Log, 3000))
	}
	return b.String()
}

// newStack prepares a stack's directories: a data directory and an images
// directory with the agent kernel and initramfs and the test image.
func newStack(t *testing.T, lab *Lab) *stack {
	t.Helper()
	s := &stack{lab: lab, bin: ironflowBinary(t)}
	// PostgreSQL runs as an unprivileged user: its directory must be
	// reachable by it, which t.TempDir's 0700 parents are not.
	dir, err := os.MkdirTemp("", "ironflow-e2e-stack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack: data kept for analysis in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	_ = os.Chmod(dir, 0o755)
	s.dataDir = filepath.Join(dir, "data")
	s.imagesDir = filepath.Join(dir, "images")
	if err := os.MkdirAll(s.imagesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	k, i := agentImages(t)
	img, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	for src, name := range map[string]string{k: "agent.kernel", i: "agent.initramfs", img: "e2e-test.img"} {
		if err := linkOrCopy(src, filepath.Join(s.imagesDir, name)); err != nil {
			t.Fatalf("stack: images dir: %v", err)
		}
	}
	return s
}

// bootFlags are the PXE settings of a lab: DHCP on the bridge, TFTP and
// HTTP boot on the lab address.
func (s *stack) bootFlags() []string {
	return []string{
		"--boot-listen", bootListen,
		"--tftp-listen", tftpListen,
		"--dhcp-interface", s.lab.Bridge,
		"--dhcp-server-address", LabAddress,
		"--dhcp-pool", LabNetwork + "," + LabPoolFirst + "," + LabPoolLast,
		"--images-dir", s.imagesDir,
	}
}

// startStack runs `ironflow dev` in the lab with the agent images and the
// test image in its images directory, and waits for the API.
func startStack(t *testing.T, lab *Lab, extra ...string) *stack {
	t.Helper()
	s := newStack(t, lab)
	args := []string{s.bin, "dev",
		"--data-dir", s.dataDir,
		"--listen", apiListen,
		"--agent-api-url", "http://" + apiListen,
		"--boot-url", "http://" + bootListen,
		"--temporal-port", temporalPort,
		"--temporal-ui-port", "-1",
		"--agent-insecure",
	}
	args = append(append(args, s.bootFlags()...), extra...)
	s.dev = lab.Start("ironflow-dev", []string{"IRONFLOW_TEMPORAL_BIN=" + temporalCLI()}, args...)
	s.procs = append(s.procs, s.dev)
	s.waitHTTP(t, "http://"+apiListen+"/v1", s.dev)
	t.Logf("stack: ironflow dev up: API http://%s, boot http://%s", apiListen, bootListen)
	return s
}

// splitStackConfig holds the flags of a split stack's processes beyond the
// lab's addresses.
type splitStackConfig struct {
	API, Worker []string
}

// startSplitStack runs ironflow as production does, one process per part
// inside the lab: PostgreSQL (devstack, reached through its unix socket,
// which crosses network namespaces), the Temporal dev server (file-backed,
// in the lab), `ironflow migrate`, `ironflow api`, `ironflow pxe` and
// `ironflow worker`. The worker can be killed and started again
// (killWorker, startWorker); workflows survive it in Temporal.
func startSplitStack(t *testing.T, lab *Lab, cfg splitStackConfig) *stack {
	t.Helper()
	s := newStack(t, lab)
	ctx, cancel := context.WithTimeout(context.Background(), stackReadyTimeout)
	defer cancel()
	pgDir := filepath.Join(s.dataDir, "pg")
	pg, err := devstack.StartPostgres(ctx, pgDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("stack: PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	// PostgreSQL runs outside the lab's namespace: stop it even if the
	// test binary dies without its cleanups.
	if err := pg.StopOnExit(false); err != nil {
		t.Logf("stack: %v", err)
	}
	dbURL := fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		devstack.PostgresSuperuser, devstack.PostgresDatabase, filepath.Join(pg.DataDir(), "run"), pg.Port())

	temporalAddr := "127.0.0.1:" + temporalPort
	targs := []string{temporalCLI(), "server", "start-dev", "--ip", "127.0.0.1", "--port", temporalPort,
		"--namespace", "default", "--headless", "--log-level", "warn",
		"--db-filename", filepath.Join(s.dataDir, "temporal.db")}
	for _, sa := range []string{workflows.SearchAttrNodeUUID, workflows.SearchAttrProvisionState, workflows.SearchAttrOperation} {
		targs = append(targs, "--search-attribute", sa+"=Keyword")
	}
	temporal := lab.Start("temporal", nil, targs...)
	s.procs = append(s.procs, temporal)
	for {
		err := lab.Command(temporalCLI(), "operator", "search-attribute", "list", "--address", temporalAddr).Run()
		if err == nil {
			break
		}
		select {
		case <-temporal.Exited():
			t.Fatalf("temporal exited: %v\n%s", temporal.err, s.logTail())
		case <-ctx.Done():
			t.Fatalf("temporal not ready within %s\n%s", stackReadyTimeout, s.logTail())
		case <-time.After(readyPollInterval):
		}
	}
	if out, err := lab.Command(s.bin, "migrate", "--database-url", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("stack: ironflow migrate: %v: %s", err, out)
	}
	api := lab.Start("ironflow-api", nil, append([]string{s.bin, "api",
		"--listen", apiListen, "--database-url", dbURL, "--temporal-address", temporalAddr}, cfg.API...)...)
	pxe := lab.Start("ironflow-pxe", nil, append([]string{s.bin, "pxe",
		"--data-dir", s.dataDir, "--database-url", dbURL}, s.bootFlags()...)...)
	s.procs = append(s.procs, api, pxe)
	s.workerArgs = append([]string{s.bin, "worker",
		"--database-url", dbURL, "--temporal-address", temporalAddr,
		"--agent-api-url", "http://" + apiListen, "--boot-url", "http://" + bootListen,
		"--agent-insecure"}, cfg.Worker...)
	s.startWorker(t)
	s.waitHTTP(t, "http://"+apiListen+"/v1", api)
	s.waitHTTP(t, "http://"+bootListen+"/images/agent.kernel", pxe)
	t.Logf("stack: ironflow api, pxe and worker up: API http://%s, boot http://%s, Temporal %s", apiListen, bootListen, temporalAddr)
	return s
}

// startWorker starts (again) the split stack's worker, each run with its
// own log.
func (s *stack) startWorker(t *testing.T) {
	t.Helper()
	s.workerRuns++
	s.worker = s.lab.Start(fmt.Sprintf("ironflow-worker-%d", s.workerRuns), []string{"IRONFLOW_LOG_LEVEL=debug"}, s.workerArgs...)
	s.procs = append(s.procs, s.worker)
}

// killWorker ends the worker as a crash would: SIGKILL, no shutdown.
func (s *stack) killWorker(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-s.worker.cmd.Process.Pid, syscall.SIGKILL)
	<-s.worker.Exited()
	t.Logf("stack: worker (pid %d) killed with SIGKILL", s.worker.cmd.Process.Pid)
}

// waitHTTP waits until url answers inside the lab, failing the test when
// p exits first or stackReadyTimeout passes.
func (s *stack) waitHTTP(t *testing.T, url string, p *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stackReadyTimeout)
	defer cancel()
	for {
		if err := s.lab.Command("busybox", "wget", "-q", "-O", "/dev/null", url).Run(); err == nil {
			return
		}
		select {
		case <-p.Exited():
			t.Fatalf("%s exited: %v\n%s", p.Name, p.err, s.logTail())
		case <-ctx.Done():
			t.Fatalf("%s: %s does not answer within %s\n%s", p.Name, url, stackReadyTimeout, s.logTail())
		case <-time.After(readyPollInterval):
		}
	}
}

func (s *stack) imageURL(name string) string { return "http://" + bootListen + "/images/" + name }

// baremetal runs the unmodified baremetal CLI inside the lab. Arguments
// after a "--driver-info" whose value holds a password are masked in logs.
func (s *stack) baremetal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return s.runCLI(t, true, args...)
}

// runCLI is baremetal, logged or not (polls are not).
func (s *stack) runCLI(t *testing.T, logIt bool, args ...string) (string, error) {
	t.Helper()
	cli := "/usr/bin/baremetal"
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the baremetal CLI is missing: install Debian's python3-ironicclient: %v", err)
	}
	cmd := s.lab.Command("/usr/bin/python3", append([]string{cli}, args...)...)
	cmd.Env = append(os.Environ(), "OS_ENDPOINT=http://"+apiListen, "OS_AUTH_TYPE=none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if logIt {
		t.Logf("baremetal %s (%.1fs)", maskArgs(args), time.Since(start).Seconds())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("baremetal %s: %w\nstdout: %s\nstderr: %s", maskArgs(args), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func maskArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, _, ok := strings.Cut(a, "="); ok && strings.Contains(k, "password") {
			a = k + "=******"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// mustCLI is baremetal that fails the test with the ironflow log's tail.
func (s *stack) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.baremetal(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.logTail())
	}
	return out
}

// startIPMISim runs `ironflow vbmc ipmi-sim` for vm inside the lab: OpenIPMI's
// ipmi_sim whose chassis_control starts QEMU with the VM's definition.
func startIPMISim(t *testing.T, s *stack, vm *LabVM, password string) {
	t.Helper()
	accel := vbmc.AccelTCG
	if Accel() == AccelKVM {
		accel = vbmc.AccelKVM
	}
	cfg := vbmc.Config{
		StateDir: filepath.Join(s.lab.Dir, "vbmc"),
		Username: "admin",
		Password: password,
		Accel:    accel,
		VMs: []vbmc.VM{{
			Name: vm.Name, MAC: vm.MAC, Disk: vm.Disk, DiskSize: vmDiskSize, MemoryMB: AgentMemoryMB,
			Firmware: vm.Firmware, Netdev: "tap:" + vm.Tap, SerialLog: vm.SerialLog,
		}},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.lab.Dir, "vbmc.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p := s.lab.Start("vbmc-ipmi-"+vm.Name, nil, s.bin, "vbmc", "ipmi-sim", "--config", path, "--vm", vm.Name, "--listen", ipmiSimListen)
	ctx, cancel := context.WithTimeout(context.Background(), ipmiSimReadyTimeout)
	defer cancel()
	if _, err := waitLine(ctx, p.Log, "ipmi_sim listening", p.Exited()); err != nil {
		t.Fatalf("ironflow vbmc ipmi-sim: %v\n%s", err, Tail(p.Log, 2000))
	}
}

// printNodeHistory logs the node's history as the API keeps it.
func printNodeHistory(t *testing.T, s *stack, uuid string) {
	t.Helper()
	if out, err := s.baremetal(t, "node", "history", "list", uuid); err == nil {
		t.Logf("node history of %s:\n%s", uuid, out)
	} else {
		t.Logf("node history: %v", err)
	}
}

// printTimeline logs the Temporal history of the node's latest workflow
// (node-<uuid>) as a timeline: when each activity, local activity, timer
// and signal happened and how long activities took, so slow phases show.
func printTimeline(t *testing.T, s *stack, uuid, what string) {
	t.Helper()
	out, err := workflowHistory(s, uuid)
	if err != nil {
		t.Log(err)
		return
	}
	lines, err := timeline(out)
	if err != nil {
		t.Logf("temporal history of node-%s: %v", uuid, err)
		return
	}
	t.Logf("timeline of %s, workflow node-%s (offsets from its start):\n%s", what, uuid, strings.Join(lines, "\n"))
}

// workflowHistory is the latest node-<uuid> workflow's history as
// `temporal workflow show -o json` prints it.
func workflowHistory(s *stack, uuid string) ([]byte, error) {
	cmd := s.lab.Command(temporalCLI(), "workflow", "show", "--workflow-id", "node-"+uuid,
		"--address", "127.0.0.1:"+temporalPort, "--output", "json")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("temporal workflow show node-%s: %w", uuid, err)
	}
	return out, nil
}

// powerActions lists the power actions the workflow asked of the BMC
// (SetPower activities, by their input's action), in order.
func powerActions(raw []byte) ([]string, error) {
	var h struct {
		Events []struct {
			Scheduled *struct {
				ActivityType struct{ Name string } `json:"activityType"`
				Input        struct {
					Payloads []struct {
						Data []byte `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"activityTaskScheduledEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	var actions []string
	for _, e := range h.Events {
		if e.Scheduled == nil || e.Scheduled.ActivityType.Name != "SetPower" {
			continue
		}
		var in workflows.PowerInput
		if len(e.Scheduled.Input.Payloads) == 0 || json.Unmarshal(e.Scheduled.Input.Payloads[0].Data, &in) != nil {
			return nil, errors.New("a SetPower activity without a readable input")
		}
		actions = append(actions, in.Action)
	}
	return actions, nil
}

// historyEvent is the part of a Temporal history event (protojson, as
// `temporal workflow show -o json` prints it) the timeline needs.
type historyEvent struct {
	EventID   string    `json:"eventId"`
	EventTime time.Time `json:"eventTime"`
	EventType string    `json:"eventType"`
	Scheduled *struct {
		ActivityType struct{ Name string } `json:"activityType"`
	} `json:"activityTaskScheduledEventAttributes"`
	Completed *struct {
		ScheduledEventID string `json:"scheduledEventId"`
	} `json:"activityTaskCompletedEventAttributes"`
	Failed *struct {
		ScheduledEventID string `json:"scheduledEventId"`
	} `json:"activityTaskFailedEventAttributes"`
	Marker *struct {
		MarkerName string                     `json:"markerName"`
		Details    map[string]json.RawMessage `json:"details"`
	} `json:"markerRecordedEventAttributes"`
	Timer *struct {
		StartToFireTimeout string `json:"startToFireTimeout"`
	} `json:"timerStartedEventAttributes"`
	Signal *struct {
		SignalName string `json:"signalName"`
	} `json:"workflowExecutionSignaledEventAttributes"`
}

// markerText names a marker; a local activity's marker carries the
// activity type in its JSON payload.
func markerText(name string, details map[string]json.RawMessage) string {
	var data struct {
		Payloads []struct {
			Data []byte `json:"data"`
		} `json:"payloads"`
	}
	if name == "LocalActivity" && json.Unmarshal(details["data"], &data) == nil && len(data.Payloads) > 0 {
		var la struct{ ActivityType string }
		if json.Unmarshal(data.Payloads[0].Data, &la) == nil && la.ActivityType != "" {
			return "local activity " + la.ActivityType
		}
	}
	return "marker " + name
}

func timeline(raw []byte) ([]string, error) {
	var h struct {
		Events []historyEvent `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	if len(h.Events) == 0 {
		return nil, errors.New("empty history")
	}
	start := h.Events[0].EventTime
	type act struct {
		name       string
		at, end    time.Time
		ok, closed bool
	}
	acts := map[string]*act{}
	var order []string
	signals := map[string]int{}
	var lines []string
	off := func(tm time.Time) string { return fmt.Sprintf("%+7.1fs", tm.Sub(start).Seconds()) }
	for _, e := range h.Events {
		typ := strings.TrimPrefix(e.EventType, "EVENT_TYPE_")
		switch {
		case e.Scheduled != nil:
			acts[e.EventID] = &act{name: e.Scheduled.ActivityType.Name, at: e.EventTime}
			order = append(order, e.EventID)
		case e.Completed != nil:
			if a := acts[e.Completed.ScheduledEventID]; a != nil {
				a.end, a.ok, a.closed = e.EventTime, true, true
			}
		case e.Failed != nil:
			if a := acts[e.Failed.ScheduledEventID]; a != nil {
				a.end, a.closed = e.EventTime, true
			}
		case e.Marker != nil:
			lines = append(lines, fmt.Sprintf("%s  %s", off(e.EventTime), markerText(e.Marker.MarkerName, e.Marker.Details)))
		case e.Timer != nil:
			lines = append(lines, fmt.Sprintf("%s  timer %s", off(e.EventTime), e.Timer.StartToFireTimeout))
		case e.Signal != nil:
			if signals[e.Signal.SignalName] == 0 {
				lines = append(lines, fmt.Sprintf("%s  first signal %s", off(e.EventTime), e.Signal.SignalName))
			}
			signals[e.Signal.SignalName]++
		case strings.HasPrefix(typ, "WORKFLOW_EXECUTION_") && typ != "WORKFLOW_EXECUTION_SIGNALED":
			lines = append(lines, fmt.Sprintf("%s  %s", off(e.EventTime), strings.ToLower(typ)))
		}
	}
	for _, id := range order {
		a := acts[id]
		status := "still running"
		if a.closed {
			status = fmt.Sprintf("took %.1fs", a.end.Sub(a.at).Seconds())
			if !a.ok {
				status += " (failed)"
			}
		}
		lines = append(lines, fmt.Sprintf("%s  activity %s %s", off(a.at), a.name, status))
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i] < lines[j] })
	for name, n := range signals {
		lines = append(lines, fmt.Sprintf("signals %s: %d", name, n))
	}
	lines = append(lines, fmt.Sprintf("%d history events", len(h.Events)))
	return lines, nil
}

// redfishListen is where `ironflow vbmc serve` answers inside a lab.
const redfishListen = "127.0.0.1:8000"

// vbmcServer is `ironflow vbmc serve` running in a lab: a Redfish BMC for
// each of its VMs, whose power on starts QEMU with the VM's definition.
type vbmcServer struct {
	proc     *Process
	password string
	stateDir string
}

// startVBMC serves Redfish for vms inside the lab. Virtual media may be
// downloaded from the lab network, where ironflow's boot service is.
func startVBMC(t *testing.T, s *stack, vms ...*LabVM) *vbmcServer {
	t.Helper()
	accel := vbmc.AccelTCG
	if Accel() == AccelKVM {
		accel = vbmc.AccelKVM
	}
	var pw [8]byte
	_, _ = rand.Read(pw[:])
	v := &vbmcServer{password: hex.EncodeToString(pw[:]), stateDir: filepath.Join(s.lab.Dir, "vbmc-redfish")}
	cfg := vbmc.Config{
		StateDir:      v.stateDir,
		Username:      "admin",
		Password:      v.password,
		MediaNetworks: []string{LabNetwork},
		Accel:         accel,
	}
	for _, vm := range vms {
		cfg.VMs = append(cfg.VMs, vbmc.VM{
			Name: vm.Name, MAC: vm.MAC, Disk: vm.Disk, DiskSize: vmDiskSize, MemoryMB: AgentMemoryMB,
			Firmware: vm.Firmware, Netdev: "tap:" + vm.Tap, SerialLog: vm.SerialLog,
		})
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.lab.Dir, "vbmc-redfish.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	v.proc = s.lab.Start("vbmc-redfish", nil, s.bin, "vbmc", "serve", "--config", path, "--listen", redfishListen)
	s.procs = append(s.procs, v.proc)
	s.waitHTTP(t, "http://"+redfishListen+"/redfish/v1", v.proc)
	return v
}

// createRedfishNode enrolls vm behind the vbmc with the baremetal CLI and
// returns its UUID; extra are more `node create` arguments.
func (s *stack) createRedfishNode(t *testing.T, v *vbmcServer, vm *LabVM, bootInterface string, extra ...string) string {
	t.Helper()
	args := []string{"node", "create", "--name", vm.Name, "--driver", "redfish",
		"--deploy-interface", "direct", "--boot-interface", bootInterface,
		"--driver-info", "redfish_address=http://" + redfishListen,
		"--driver-info", "redfish_system_id=/redfish/v1/Systems/" + vm.Name,
		"--driver-info", "redfish_username=admin",
		"--driver-info", "redfish_password=" + v.password,
		"--property", "capabilities=boot_mode:" + vm.Firmware,
		"-f", "value", "-c", "uuid"}
	uuid := strings.TrimSpace(s.mustCLI(t, append(args, extra...)...))
	t.Logf("node %s is %s", vm.Name, uuid)
	s.mustCLI(t, "port", "create", vm.MAC, "--node", uuid)
	return uuid
}

// deploy runs `baremetal node deploy --wait` with a config drive naming
// the host, and fails the test with the node, the logs and the console
// when it does not reach active.
func (s *stack) deploy(t *testing.T, uuid string, vm *LabVM, hostname, pubKey string) {
	t.Helper()
	cd, err := json.Marshal(map[string]any{"meta_data": map[string]any{
		"hostname": hostname, "public_keys": map[string]string{"0": pubKey}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", string(cd), "--wait", seconds(deployWait)); err != nil {
		t.Fatalf("%v\nnode: %s\n%s\nVM console tail:\n%s", err, s.nodeShow(t, uuid), s.logTail(), Tail(vm.SerialLog, 3000))
	}
}

// nodeShow is the node's state fields as JSON, for messages.
func (s *stack) nodeShow(t *testing.T, uuid string) string {
	t.Helper()
	out, err := s.baremetal(t, "node", "show", uuid, "-f", "json", "-c", "provision_state", "-c", "target_provision_state",
		"-c", "power_state", "-c", "last_error", "-c", "driver_internal_info")
	if err != nil {
		return err.Error()
	}
	return out
}

// nodeFields reads fields of the node through the CLI.
func (s *stack) nodeFields(t *testing.T, uuid string) map[string]any {
	t.Helper()
	out := s.mustCLI(t, "node", "show", uuid, "-f", "json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("node show %s: %v: %s", uuid, err, out)
	}
	return m
}

// waitBootedFromDisk waits for the test image's markers on the VM's
// console: booted from disk with the firmware, the config drive's host.
func waitBootedFromDisk(t *testing.T, vm *LabVM, hostname, pubKey string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E hostname="+hostname+" key="+pubKey, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware="+vm.Firmware); !ok {
		t.Errorf("VM %s: no booted-from-disk firmware=%s marker on the console", vm.Name, vm.Firmware)
	}
}
