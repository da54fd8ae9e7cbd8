package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/vbmc"
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
type stack struct {
	lab       *Lab
	bin       string
	dataDir   string
	imagesDir string
	dev       *Process
}

// startStack runs `ironflow dev` in the lab with the agent images and the
// test image in its images directory, and waits for the API.
func startStack(t *testing.T, lab *Lab, extra ...string) *stack {
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
	args := []string{s.bin, "dev",
		"--data-dir", s.dataDir,
		"--listen", apiListen,
		"--boot-listen", bootListen,
		"--agent-api-url", "http://" + apiListen,
		"--boot-url", "http://" + bootListen,
		"--tftp-listen", tftpListen,
		"--dhcp-interface", lab.Bridge,
		"--dhcp-server-address", LabAddress,
		"--dhcp-pool", LabNetwork + "," + LabPoolFirst + "," + LabPoolLast,
		"--images-dir", s.imagesDir,
		"--temporal-port", temporalPort,
		"--temporal-ui-port", "-1",
		"--agent-insecure",
	}
	args = append(args, extra...)
	s.dev = lab.Start("ironflow-dev", []string{"IRONFLOW_TEMPORAL_BIN=" + temporalCLI()}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), stackReadyTimeout)
	defer cancel()
	for {
		if err := lab.Command("busybox", "wget", "-q", "-O", "/dev/null", "http://"+apiListen+"/v1").Run(); err == nil {
			break
		}
		select {
		case <-s.dev.Exited():
			t.Fatalf("ironflow dev exited: %v\n%s", s.dev.err, Tail(s.dev.Log, 3000))
		case <-ctx.Done():
			t.Fatalf("ironflow dev: API not up within %s\n%s", stackReadyTimeout, Tail(s.dev.Log, 3000))
		case <-time.After(readyPollInterval):
		}
	}
	t.Logf("stack: ironflow dev up: API http://%s, boot http://%s", apiListen, bootListen)
	return s
}

func (s *stack) imageURL(name string) string { return "http://" + bootListen + "/images/" + name }

// baremetal runs the unmodified baremetal CLI inside the lab. Arguments
// after a "--driver-info" whose value holds a password are masked in logs.
func (s *stack) baremetal(t *testing.T, args ...string) (string, error) {
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
	t.Logf("baremetal %s (%.1fs)", maskArgs(args), time.Since(start).Seconds())
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
		t.Fatalf("%v\nironflow dev log tail:\n%s", err, Tail(s.dev.Log, 4000))
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
	cmd := s.lab.Command(temporalCLI(), "workflow", "show", "--workflow-id", "node-"+uuid,
		"--address", "127.0.0.1:"+temporalPort, "--output", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Logf("temporal workflow show node-%s: %v", uuid, err)
		return
	}
	lines, err := timeline(out)
	if err != nil {
		t.Logf("temporal history of node-%s: %v", uuid, err)
		return
	}
	t.Logf("timeline of %s, workflow node-%s (offsets from its start):\n%s", what, uuid, strings.Join(lines, "\n"))
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
