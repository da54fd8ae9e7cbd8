package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/workflows"
)

// crashCase is one row of the crash table: a point of a deploy, a cleaning
// or an undeploy (docs/architecture.md's thirteen steps), where the crash
// hook (crashhook/on.go) stops the worker, and which process is
// killed while the node is there.
type crashCase struct {
	op   string // deploy, clean, undeploy
	step string // the step of docs/architecture.md (deploy) or the stage
	rule string // the hook's point[,phase]
	kill string // worker, api, temporal

	name, uuid, mac, stateFile string
	img                        *countingImage
	// outcome
	state, lastError                         string
	downloads, bmcBoots, agentBoots, cdrives int
	doneAtKill                               bool
	verdict                                  string
}

// The cases: every activity a direct deploy runs on fake-hardware with the
// simulated agent, in order (workflows/deploy.go), at the start of the
// activity or after its effect; the same for cleaning (provide) and
// undeploy (workflows/undeploynode.go); a sample of steps for the API and the
// Temporal server.
var crashCases = []crashCase{
	{op: "deploy", step: "1-2 workflow started", rule: "LoadNode"},
	{op: "deploy", step: "3 deploying recorded", rule: "RecordState/deploying,after"},
	{op: "deploy", step: "4 agent boot prepared", rule: "PrepareBoot/agent,after"},
	{op: "deploy", step: "4 boot device pxe", rule: "SetBootDevice/pxe,after"},
	{op: "deploy", step: "4 power on (agent)", rule: "SetPower/rebooting,after"},
	{op: "deploy", step: "5-7 wait call-back", rule: "RecordState/wait call-back,after"},
	{op: "deploy", step: "8 agent called back", rule: "RecordState/deploying:2"},
	{op: "deploy", step: "9 write_image sent", rule: "RunAgentStep/write_image"},
	{op: "deploy", step: "10 image streaming", rule: "RunAgentStep/write_image,after"},
	{op: "deploy", step: "11 image + config drive written", rule: "RunAgentStep/write_image,done"},
	{op: "deploy", step: "12 prepare_instance_boot", rule: "RunAgentStep/prepare_instance_boot"},
	{op: "deploy", step: "12 boot device disk", rule: "SetBootDevice/disk,after"},
	{op: "deploy", step: "12 tear_down_agent (agent)", rule: "AgentPowerOff,after"},
	{op: "deploy", step: "12 tear_down_agent (BMC off)", rule: "SetPower/power off,after"},
	{op: "deploy", step: "13 boot config removed", rule: "CleanBoot/agent,after"},
	{op: "deploy", step: "13 power on (instance)", rule: "SetPower/power on,after"},
	{op: "deploy", step: "13 active recorded", rule: "RecordState/active"},

	{op: "clean", step: "cleaning recorded", rule: "RecordState/cleaning,after"},
	{op: "clean", step: "prepare cleaning", rule: "PrepareBoot/agent,after"},
	{op: "clean", step: "power on (agent)", rule: "SetPower/rebooting,after"},
	{op: "clean", step: "clean wait", rule: "RecordState/clean wait,after"},
	{op: "clean", step: "agent called back", rule: "RecordState/cleaning:2"},
	{op: "clean", step: "get clean steps", rule: "GetAgentSteps,after"},
	{op: "clean", step: "erase_devices_metadata sent", rule: "RunAgentStep/erase_devices_metadata"},
	{op: "clean", step: "erase_devices_metadata running", rule: "RunAgentStep/erase_devices_metadata,after"},
	{op: "clean", step: "erase_devices_metadata done", rule: "RunAgentStep/erase_devices_metadata,done"},
	{op: "clean", step: "tear down agent (agent)", rule: "AgentPowerOff,after"},
	{op: "clean", step: "tear down agent (BMC off)", rule: "SetPower/power off,after"},
	{op: "clean", step: "clean up boot", rule: "CleanBoot/agent,after"},
	{op: "clean", step: "available recorded", rule: "RecordState/available"},

	{op: "undeploy", step: "deleting recorded", rule: "RecordState/deleting,after"},
	{op: "undeploy", step: "power off", rule: "SetPower/power off,after"},
	{op: "undeploy", step: "clean up instance boot", rule: "CleanBoot/instance,after"},
	{op: "undeploy", step: "instance_info cleared", rule: "ClearInstanceInfo,after"},
	{op: "undeploy", step: "cleaning recorded", rule: "RecordState/cleaning"},

	{op: "deploy", step: "4 power on (agent)", rule: "SetPower/rebooting,after", kill: "api"},
	{op: "deploy", step: "5-7 wait call-back (agent looks up)", rule: "RecordState/wait call-back,after", kill: "api"},
	{op: "deploy", step: "10 image streaming", rule: "RunAgentStep/write_image,after", kill: "api"},
	{op: "deploy", step: "4 power on (agent)", rule: "SetPower/rebooting,after", kill: "temporal"},
	{op: "deploy", step: "10 image streaming", rule: "RunAgentStep/write_image,after", kill: "temporal"},
	{op: "deploy", step: "13 power on (instance)", rule: "SetPower/power on,after", kill: "temporal"},
}

// TestCrashAtEveryStep kills the worker (SIGKILL, from the crash hook of a
// worker built with -tags crashhook) while each node of a fleet is at its
// own step of a deploy, a cleaning or an undeploy — one kill while every
// node of the round is held at its point —, and the API and the Temporal
// server at a sample of steps. Every node must then finish (active, or
// available after cleaning) with each action on the hardware done once:
// one image download, one power-on per boot at the BMC (fake-hardware's
// state file), one agent boot per boot, one config-drive write.
func TestCrashAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED LOUDLY: -short skips the crash-at-every-step test")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := crashhookBinary(t, dir)
	// IRONFLOW_CRASH_ONLY=<substring> runs only the matching cases (to
	// debug one row).
	var cases []*crashCase
	for i := range crashCases {
		c := crashCases[i]
		if only := os.Getenv("IRONFLOW_CRASH_ONLY"); only != "" && !strings.Contains(c.op+" "+c.step+" "+c.rule+" "+c.kill, only) {
			continue
		}
		if c.kill == "" {
			c.kill = "worker"
		}
		c.name = fmt.Sprintf("crash-%02d", i)
		c.mac = fmt.Sprintf("52:54:00:cc:01:%02x", i)
		c.stateFile = filepath.Join(dir, c.name+".bmc.json")
		size, delay := 1<<20, time.Duration(0)
		if strings.HasPrefix(c.rule, "RunAgentStep/write_image,after") {
			// Slow enough that the write still streams when the kill lands.
			size, delay = 4<<20, 15*time.Second
		}
		c.img = newCountingImage(t, size, delay)
		c.uuid = enrollCrashNode(t, c)
		cases = append(cases, &c)
	}
	machines := map[string]string{}
	for _, c := range cases {
		machines[c.uuid] = c.mac
	}
	fleet := startFleet(t, machines, func(string) sim.Config { return sim.Config{HeartbeatInterval: time.Second} })

	// The lab's worker manages the nodes, then gives way to crashhook
	// workers; it is back when the test ends.
	for _, c := range cases {
		if code, _ := call(t, "PUT", "/v1/nodes/"+c.uuid+"/states/provision", map[string]any{"target": "manage"}, nil); code != 202 {
			t.Fatalf("manage %s: %d", c.name, code)
		}
	}
	for _, c := range cases {
		waitState(t, c.uuid, "manageable", 120*time.Second)
	}
	waitUnlocked(t, cases)
	lab.KillWorker()
	t.Cleanup(func() {
		lab.KillWorker()
		if err := lab.StartWorker(); err != nil {
			t.Errorf("restart the lab worker: %v", err)
		}
	})
	of := func(op, kill string) []*crashCase {
		var out []*crashCase
		for _, c := range cases {
			if c.op == op && c.kill == kill {
				out = append(out, c)
			}
		}
		return out
	}
	verb := func(cs []*crashCase, target string, body map[string]any) {
		for _, c := range cs {
			b := map[string]any{"target": target}
			for k, v := range body {
				b[k] = v
			}
			if code, _ := call(t, "PUT", "/v1/nodes/"+c.uuid+"/states/provision", b, nil); code != 202 {
				t.Fatalf("%s %s: %d", target, c.name, code)
			}
		}
	}
	configDrive := map[string]any{"meta_data": map[string]any{"hostname": "crash", "public_keys": map[string]any{"0": "ssh-ed25519 AAAAC3Nza crash"}}}

	// Round 1: cleaning (provide). Only the clean nodes clean.
	clean := of("clean", "worker")
	for _, c := range cases {
		patchNode(t, c.uuid, map[string]any{"op": "add", "path": "/automated_clean", "value": c.op == "clean" && c.kill == "worker"})
	}
	w := startCrashWorker(t, bin, filepath.Join(dir, "round-clean"), clean, "hold")
	verb(cases, "provide", nil)
	waitHoldKill(t, w, filepath.Join(dir, "round-clean"), clean)
	restartLabWorker(t)
	settle(t, cases, "available")

	// Round 2: deploy. The undeploy nodes deploy too (no point of theirs,
	// but the same kill).
	deploy := of("deploy", "worker")
	undeploy := of("undeploy", "worker")
	lab.KillWorker()
	w = startCrashWorker(t, bin, filepath.Join(dir, "round-deploy"), deploy, "hold")
	verb(append(append([]*crashCase{}, deploy...), undeploy...), "active", map[string]any{"configdrive": configDrive})
	waitHoldKill(t, w, filepath.Join(dir, "round-deploy"), deploy)
	for _, c := range deploy {
		// Only the image-streaming row is meant to be killed mid-write.
		c.doneAtKill = strings.HasPrefix(c.rule, "RunAgentStep/write_image,after") && c.img.completed.Load() > 0
	}
	restartLabWorker(t)
	settle(t, append(append([]*crashCase{}, deploy...), undeploy...), "active")

	// Round 3: undeploy, with cleaning.
	waitUnlocked(t, undeploy)
	lab.KillWorker()
	for _, c := range undeploy {
		patchNode(t, c.uuid, map[string]any{"op": "add", "path": "/automated_clean", "value": true})
	}
	w = startCrashWorker(t, bin, filepath.Join(dir, "round-undeploy"), undeploy, "hold")
	verb(undeploy, "deleted", nil)
	waitHoldKill(t, w, filepath.Join(dir, "round-undeploy"), undeploy)
	restartLabWorker(t)
	settle(t, undeploy, "available")

	// Round 4: the API and the Temporal server are killed while the worker
	// (which survives) holds each node at its step.
	api, tmp := of("deploy", "api"), of("deploy", "temporal")
	both := append(append([]*crashCase{}, api...), tmp...)
	waitUnlocked(t, both)
	lab.KillWorker()
	stateDir := filepath.Join(dir, "round-api-temporal")
	w = startCrashWorker(t, bin, stateDir, both, "pause")
	verb(both, "active", map[string]any{"configdrive": configDrive})
	waitReached(t, w, stateDir, both, 150*time.Second)
	lab.KillAPI()
	release(t, stateDir, 0, len(api))
	if err := lab.StartAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := lab.RestartTemporal(context.Background()); err != nil {
		t.Fatal(err)
	}
	release(t, stateDir, len(api), len(both))
	settle(t, both, "active")
	for _, c := range both {
		c.doneAtKill = false
	}

	// The table, and what each row must show.
	fleet.stop()
	var table strings.Builder
	table.WriteString("| operation | step | hook point | process killed | outcome | image downloads | BMC boots | agent boots | config-drive writes | verdict |\n")
	table.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cases {
		c.downloads = int(c.img.started.Load())
		if st, err := bmc.ReadFakeState(c.stateFile); err == nil {
			c.bmcBoots = st.Boots()
		} else {
			t.Errorf("%s: read the fake BMC's state: %v", c.name, err)
		}
		c.agentBoots, c.cdrives = fleet.counts(c.uuid)
		want := map[string][4]int{ // downloads, BMC boots, agent boots, config drives
			"deploy":   {1, 2, 1, 1},
			"clean":    {0, 1, 1, 0},
			"undeploy": {1, 3, 2, 1},
		}[c.op]
		wantState := map[string]string{"deploy": "active", "clean": "available", "undeploy": "available"}[c.op]
		got := [4]int{c.downloads, c.bmcBoots, c.agentBoots, c.cdrives}
		var bad []string
		if c.state != wantState {
			bad = append(bad, fmt.Sprintf("ended %q (last_error %q), want %q", c.state, c.lastError, wantState))
		}
		for i, what := range []string{"image downloads", "BMC boots", "agent boots", "config-drive writes"} {
			if got[i] != want[i] {
				bad = append(bad, fmt.Sprintf("%s %d, want %d", what, got[i], want[i]))
			}
		}
		c.verdict = "ok"
		if len(bad) > 0 {
			c.verdict = "FAIL: " + strings.Join(bad, "; ")
			t.Errorf("%s %s at %q (%s killed): %s\n%s", c.op, c.step, c.rule, c.kill, strings.Join(bad, "; "),
				linesAbout(c.uuid, filepath.Join(dir, "crashhook-worker.log"), lab.WorkerLog(), lab.APILog()))
		}
		outcome := c.state
		if c.doneAtKill {
			outcome += " (the write had finished before the kill)"
		}
		fmt.Fprintf(&table, "| %s | %s | `%s` | %s | %s | %d | %d | %d | %d | %s |\n",
			c.op, c.step, c.rule, c.kill, outcome, c.downloads, c.bmcBoots, c.agentBoots, c.cdrives, c.verdict)
	}
	t.Logf("crash at every step (%d cases, %s):\n%s", len(cases), time.Since(start).Round(time.Second), table.String())
	if t.Failed() {
		t.Logf("crashhook worker log:\n%s", embedded.Tail(filepath.Join(dir, "crashhook-worker.log"), 8000))
	}
}

// linesAbout is the last lines of each log that name uuid.
func linesAbout(uuid string, logs ...string) string {
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, uuid) {
				lines = append(lines, firstLine(line, 600))
			}
		}
		fmt.Fprintf(&b, "--- %s (%d lines about %s):\n%s\n", filepath.Base(l), len(lines), uuid, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}

// crashhookBinary is $IRONFLOW_CRASH_BIN, or ironflow built with -tags
// crashhook (the hook is in no other build), built once per test process
// into a directory of its own (TestMain removes it) and shared by the tests
// that use it.
func crashhookBinary(t *testing.T, _ string) string {
	if b := os.Getenv("IRONFLOW_CRASH_BIN"); b != "" {
		return b
	}
	crashBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "ironflow-crashhook-")
		if err != nil {
			crashBuild.err = err
			return
		}
		crashBuild.bin = filepath.Join(dir, "ironflow-crashhook")
		cmd := exec.Command("go", "build", "-tags", "crashhook", "-o", crashBuild.bin, "./cmd/ironflow")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			crashBuild.err = fmt.Errorf("%w\n%s", err, b)
		}
	})
	if crashBuild.err != nil {
		t.Fatalf("build ironflow -tags crashhook: %v", crashBuild.err)
	}
	return crashBuild.bin
}

var crashBuild struct {
	once sync.Once
	bin  string
	err  error
}

func enrollCrashNode(t *testing.T, c crashCase) string {
	t.Helper()
	var n node
	if code, _ := call(t, "POST", "/v1/nodes", map[string]any{
		"name": c.name, "driver": "fake-hardware", "deploy_interface": "direct",
		"driver_info": map[string]any{"fake_state_file": c.stateFile},
		"properties":  map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
	}, &n); code != 201 {
		t.Fatalf("create node %s: %d", c.name, code)
	}
	if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": c.mac, "node_uuid": n.UUID}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+n.UUID, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": c.img.URL + "/disk.raw"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": c.img.sha256},
	}, nil); code != 200 {
		t.Fatalf("set instance_info: %d", code)
	}
	return n.UUID
}

// startCrashWorker starts the crashhook worker in the lab worker's place,
// with a rule per case (action hold or pause).
func startCrashWorker(t *testing.T, bin, stateDir string, cs []*crashCase, action string) *embedded.Process {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rules := make([]string, len(cs))
	for i, c := range cs {
		rules[i] = fmt.Sprintf("%s,node=%s,%s", c.rule, c.uuid, action)
	}
	cmd := exec.Command(bin, lab.WorkerArgs()...)
	// The lab encrypts payloads: the crashhook worker gets its key, as lab.Spawn does.
	cmd.Env = append(os.Environ(), "IRONFLOW_PAYLOAD_KEY="+lab.PayloadKey, "IRONFLOW_LOG_LEVEL=debug", "IRONFLOW_CRASH_AT="+strings.Join(rules, ";"), "IRONFLOW_CRASH_STATE="+stateDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := embedded.StartProcess("ironflow-worker-crashhook", filepath.Join(filepath.Dir(stateDir), "crashhook-worker.log"), cmd)
	if err != nil {
		t.Fatal(err)
	}
	lab.Worker = p
	return p
}

// waitReached waits until every case's rule is reached (its node is held
// at its step).
func waitReached(t *testing.T, w *embedded.Process, stateDir string, cs []*crashCase, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for i, c := range cs {
			if _, err := os.Stat(filepath.Join(stateDir, strconv.Itoa(i)+".reached")); err != nil {
				missing = append(missing, fmt.Sprintf("%s %s (%s, %s)", c.op, c.step, c.rule, c.name))
			}
		}
		if len(missing) == 0 {
			return
		}
		if !w.Running() && len(missing) > 0 {
			t.Fatalf("the crashhook worker died before these points were reached: %v\n%s", missing, w.Tail(6000))
		}
		if time.Now().After(deadline) {
			w.Kill()
			t.Fatalf("never reached within %s: %v\n%s", timeout, missing, w.Tail(6000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitHoldKill waits until the hook has killed its worker: once every
// case's node is held at its step.
func waitHoldKill(t *testing.T, w *embedded.Process, stateDir string, cs []*crashCase) {
	t.Helper()
	if len(cs) == 0 {
		w.Kill()
		lab.Worker = nil
		return
	}
	waitReached(t, w, stateDir, cs, 150*time.Second)
	select {
	case <-w.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("every point was reached but the worker did not kill itself\n%s", w.Tail(4000))
	}
	if !strings.Contains(w.Tail(2000), "crashhook: SIGKILL") {
		t.Fatalf("the worker exited, but not by the hook's kill: %v\n%s", w.Err(), w.Tail(4000))
	}
	lab.Worker = nil
}

func restartLabWorker(t *testing.T) {
	t.Helper()
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
}

// release lets the held nodes of rules [from, to) of a round go on.
func release(t *testing.T, stateDir string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := os.WriteFile(filepath.Join(stateDir, strconv.Itoa(i)+".go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitUnlocked waits until no workflow holds any case's node. A node's
// workflow records its settled state (manageable, available, active) and
// then closes: a worker killed in between leaves the workflow open until
// the next worker finishes it, and a verb sent meanwhile is refused with
// 409 NodeLocked once the API's lock retries run out, as Ironic's would
// be. The rounds hand the nodes from one worker to the next only once
// they are free.
func waitUnlocked(t *testing.T, cs []*crashCase) {
	t.Helper()
	c := temporalClient(t)
	deadline := time.Now().Add(120 * time.Second)
	for _, cc := range cs {
		for {
			d, err := c.DescribeWorkflowExecution(context.Background(), workflows.WorkflowID(cc.uuid), "")
			if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (%s): its workflow still holds the node after 120s (describe: %v)", cc.name, cc.step, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// settle waits for every case's node to reach a stable state and records it.
func settle(t *testing.T, cs []*crashCase, want string) {
	t.Helper()
	deadline := time.Now().Add(240 * time.Second)
	for _, c := range cs {
		for {
			n, ok := tryGetNode(c.uuid)
			if ok {
				c.state, c.lastError = n.ProvisionState, deref(n.LastError)
				if n.ProvisionState == want || strings.HasSuffix(n.ProvisionState, "failed") ||
					(n.ProvisionState == "active" || n.ProvisionState == "available") && n.TargetProvisionState == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Errorf("%s %s (%s): still %q waiting for %q", c.op, c.step, c.name, c.state, want)
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// countingImage serves one whole-disk image and counts the downloads that
// started and those that were served to the end.
type countingImage struct {
	*httptest.Server
	sha256             string
	started, completed atomic.Int64
	// perNode counts the downloads that started by the URL's node query
	// (a node's image_source may name it: the soak's do).
	perNode sync.Map
}

// forNode is how many downloads started of the URL whose node query is key.
func (s *countingImage) forNode(key string) int64 {
	if v, ok := s.perNode.Load(key); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func newCountingImage(t *testing.T, size int, total time.Duration) *countingImage {
	data := make([]byte, size)
	_, _ = rand.Read(data)
	clear(data[440:512])
	entry := data[446:462]
	entry[4] = 0x83
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], uint32(size/512-2048))
	data[510], data[511] = 0x55, 0xaa
	sum := sha256.Sum256(data)
	s := &countingImage{sha256: hex.EncodeToString(sum[:])}
	chunks := (size + 1<<20 - 1) >> 20
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk.raw" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet || r.Header.Get("Range") != "" {
			http.ServeContent(w, r, "disk.raw", time.Time{}, bytes.NewReader(data))
			return
		}
		s.started.Add(1)
		if key := r.URL.Query().Get("node"); key != "" {
			v, _ := s.perNode.LoadOrStore(key, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		for off := 0; off < len(data); off += 1 << 20 {
			if _, err := w.Write(data[off:min(off+1<<20, len(data))]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if total > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(total / time.Duration(chunks)):
				}
			}
		}
		s.completed.Add(1)
	}))
	t.Cleanup(s.Close)
	return s
}

// fleet plays machines (node UUID → MAC): one loop reads the nodes' states
// (list requests, not a poll per node) and boots a simulated agent, with
// the configuration cfg gives (the lab's API unless it names another), for
// a node that waits for one and has none running.
type fleet struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	agents map[string][]*sim.Agent
}

func startFleet(t *testing.T, macs map[string]string, cfg func(uuid string) sim.Config) *fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{cancel: cancel, done: make(chan struct{}), agents: map[string][]*sim.Agent{}}
	go func() {
		defer close(f.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			states, ok := listStates()
			if !ok {
				continue // the API may be down: a machine tries again
			}
			for uuid, mac := range macs {
				switch states[uuid] {
				case "wait call-back", "clean wait":
				default:
					continue
				}
				f.mu.Lock()
				as := f.agents[uuid]
				running := len(as) > 0 && as[len(as)-1].PoweredOn()
				f.mu.Unlock()
				if running {
					continue
				}
				c := cfg(uuid)
				if c.APIURL == "" {
					c.APIURL = lab.APIURL
				}
				c.MACs = []string{mac}
				a, err := sim.Start(ctx, c)
				if err != nil {
					t.Errorf("boot simulated agent: %v", err)
					return
				}
				f.mu.Lock()
				f.agents[uuid] = append(f.agents[uuid], a)
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *fleet) stop() {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, as := range f.agents {
		for _, a := range as {
			if a.PoweredOn() {
				a.Stop()
			}
		}
	}
}

// counts are a node's agent boots and config-drive writes over all of them.
func (f *fleet) counts(uuid string) (boots, configDrives int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.agents[uuid] {
		for _, d := range a.Hardware().Disks() {
			configDrives += d.ConfigDriveWrites()
		}
	}
	return len(f.agents[uuid]), configDrives
}

// listStates reads every node's provision state, a page of 1,000 at a time.
func listStates() (map[string]string, bool) {
	out := map[string]string{}
	marker := ""
	for {
		url := lab.APIURL + "/v1/nodes?fields=uuid,provision_state&limit=1000"
		if marker != "" {
			url += "&marker=" + marker
		}
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			return nil, false
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, false
		}
		var body struct {
			Nodes []struct {
				UUID           string `json:"uuid"`
				ProvisionState string `json:"provision_state"`
			} `json:"nodes"`
		}
		ok := resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&body) == nil
		resp.Body.Close()
		if !ok {
			return nil, false
		}
		for _, n := range body.Nodes {
			out[n.UUID] = n.ProvisionState
		}
		if len(body.Nodes) < 1000 {
			return out, true
		}
		marker = body.Nodes[len(body.Nodes)-1].UUID
	}
}
