package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/workflows"
)

// TestForgedHeartbeatSignalChangesNothing sends agent-heartbeat signals
// straight to Temporal with the real temporal CLI, as an attacker who reaches
// Temporal would, while a deploy waits in wait call-back: with a made-up
// callback URL, without a token and with a plausible one and a made-up MAC.
// Nothing changes (the node keeps waiting, the forged URL gets no request),
// the worker logs the refusal, and the real agent's heartbeat then deploys.
func TestForgedHeartbeatSignalChangesNothing(t *testing.T) {
	var forgedCalls atomic.Int32
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forgedCalls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(listener.Close)
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}

	img := newImageServer(t, 1<<20)
	mac := "52:54:00:bb:01:16"
	uuid := enrollAgentNode(t, "forged-signal-0", mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, verb := range []string{"manage", "provide", "active"} {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}, nil); code != 202 {
			t.Fatalf("%s: %d", verb, code)
		}
		waitState(t, uuid, map[string]string{"manage": "manageable", "provide": "available", "active": "wait call-back"}[verb], 60*time.Second)
	}

	forged := []map[string]any{
		{"callback_url": listener.URL, "agent_version": "10.0", "received_at": time.Now().UTC()},
		{"callback_url": listener.URL, "agent_version": "10.0", "received_at": time.Now().UTC(),
			"agent_token": "rbEz4Mg0tM6qCzLrh9NTnMSNQi4dcoXdx4MmjZ8NNCE", "nonce": "bm9uY2U", "mac": "q3a1Vd2n8f0H7y1k0mN5d1b2c3d4e5f6g7h8i9j0k1l"},
		{"callback_url": listener.URL, "agent_version": "10.0", "agent_status": "end", "received_at": time.Now().UTC()},
	}
	for _, in := range forged {
		b, _ := json.Marshal(in)
		out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(),
			"--workflow-id", workflows.WorkflowID(uuid), "--name", workflows.SignalHeartbeat, "--input", string(b)).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow signal: %v\n%s", err, out)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(readFile(lab.WorkerLog()), "heartbeat signal refused") < len(forged) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if n := strings.Count(readFile(lab.WorkerLog()), "heartbeat signal refused"); n < len(forged) {
		t.Fatalf("the worker logged %d refused signals, want %d\n%s", n, len(forged), workerLog())
	}
	time.Sleep(2 * time.Second) // what a trusted signal would have started by now
	if n := getNode(t, uuid); n.ProvisionState != "wait call-back" {
		t.Fatalf("after forged signals the node is %q, want wait call-back", n.ProvisionState)
	}
	if got := forgedCalls.Load(); got != 0 {
		t.Fatalf("the forged callback URL received %d requests", got)
	}

	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	waitState(t, uuid, "active", 120*time.Second)
	if got := forgedCalls.Load(); got != 0 {
		t.Fatalf("the forged callback URL received %d requests", got)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// historySignal is one heartbeat signal as the workflow's history holds it:
// the payload exactly as sent (data and metadata), and its JSON when the
// payload is plain.
type historySignal struct {
	data []byte
	meta map[string][]byte
	hb   map[string]any
}

// heartbeatSignals reads the heartbeat signals of the node's latest workflow
// run with `temporal workflow show --output json`, as anyone who reaches
// Temporal can.
func heartbeatSignals(t *testing.T, cli, uuid string) []historySignal {
	t.Helper()
	out, err := exec.Command(cli, "workflow", "show", "--address", lab.Temporal.Address(),
		"--workflow-id", workflows.WorkflowID(uuid), "--output", "json").Output()
	if err != nil {
		t.Fatalf("temporal workflow show: %v\n%s", err, out)
	}
	var h struct {
		Events []struct {
			Attrs *struct {
				SignalName string `json:"signalName"`
				Input      struct {
					Payloads []struct {
						Metadata map[string][]byte `json:"metadata"`
						Data     []byte            `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"workflowExecutionSignaledEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("history JSON: %v", err)
	}
	var got []historySignal
	for _, e := range h.Events {
		if e.Attrs == nil || e.Attrs.SignalName != workflows.SignalHeartbeat || len(e.Attrs.Input.Payloads) != 1 {
			continue
		}
		p := e.Attrs.Input.Payloads[0]
		s := historySignal{data: p.Data, meta: p.Metadata}
		if string(p.Metadata["encoding"]) == "json/plain" {
			_ = json.Unmarshal(p.Data, &s.hb)
		}
		got = append(got, s)
	}
	return got
}

// resend sends a captured signal again, byte for byte, with the real
// temporal CLI.
func resend(t *testing.T, cli, uuid string, s historySignal) {
	t.Helper()
	args := []string{"workflow", "signal", "--address", lab.Temporal.Address(), "--workflow-id", workflows.WorkflowID(uuid),
		"--name", workflows.SignalHeartbeat}
	if string(s.meta["encoding"]) == "json/plain" && len(s.meta) == 1 {
		// The CLI checks --input-base64 inputs for JSON before decoding
		// them, so plain JSON goes as it is (the same bytes).
		args = append(args, "--input", string(s.data))
	} else {
		args = append(args, "--input-base64", "--input", base64.StdEncoding.EncodeToString(s.data))
		for k, v := range s.meta {
			args = append(args, "--input-meta", k+"="+string(v))
		}
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal %q: %v\n%s", args, err, out)
	}
}

// TestReplayedHeartbeatSignalChangesNothing captures real signed heartbeat
// signals from workflow history with the temporal CLI, as an attacker who
// reaches Temporal would, and sends them again within their five minutes:
//
//   - into the same run: an installer's "start" report, sent again while the
//     deploy waits; the workflow logs it as replayed and ignores it;
//   - into the next operation of the node: the first deploy's "end" report,
//     sent into the rebuild's wait, would make the node active without an
//     installation; the worker refuses it (another agent token) and the node
//     keeps waiting, until its own installer reports the end.
func TestReplayedHeartbeatSignalChangesNothing(t *testing.T) {
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	uuid := createNode(t, map[string]any{"name": "replayed-signal-0", "driver": "fake-hardware", "deploy_interface": "anaconda", "automated_clean": false}, "52:54:00:bb:01:17")
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/kernel", "value": "http://images.example/anaconda/vmlinuz"},
		{"op": "add", "path": "/instance_info/ramdisk", "value": "http://images.example/anaconda/initrd.img"},
		{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/rootfs.tar"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	st := openStore(t)
	// installer posts a heartbeat as the kickstart's %pre/%post do, with
	// the token of the kickstart served for this operation.
	installer := func(status string) {
		t.Helper()
		bc, err := st.GetBootConfig(context.Background(), uuid)
		if err != nil {
			t.Fatalf("no boot configuration for the installer: %v", err)
		}
		m := regexp.MustCompile(`"agent_token": *"([A-Za-z0-9_-]{43})"`).FindStringSubmatch(bc.Kickstart)
		if m == nil {
			t.Fatal("no agent token in the kickstart")
		}
		body, _ := json.Marshal(map[string]any{"callback_url": "", "agent_token": m[1], "agent_version": "anaconda", "agent_status": status})
		req, _ := http.NewRequest("POST", lab.APIURL+"/v1/heartbeat/"+uuid, bytes.NewReader(body))
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.72")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("installer heartbeat %s: HTTP %d", status, resp.StatusCode)
		}
	}
	signals := func(n int) []historySignal {
		t.Helper()
		var got []historySignal
		waitFor(t, fmt.Sprintf("%d heartbeat signals in the history", n), 30*time.Second, func() bool {
			got = heartbeatSignals(t, cli, uuid)
			return len(got) >= n
		})
		for _, s := range got {
			if s.hb != nil && (s.hb["mac"] == nil || s.hb["nonce"] == nil) {
				t.Fatalf("a heartbeat signal in history is not signed: %v", s.hb)
			}
		}
		return got
	}
	logCount := func(what string) int { return strings.Count(readFile(lab.WorkerLog()), what) }
	waitLog := func(what string, n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d × %q in the worker log", n, what), 30*time.Second, func() bool { return logCount(what) >= n })
	}
	stillWaiting := func(after string) {
		t.Helper()
		time.Sleep(2 * time.Second) // what an accepted signal would have started by now
		if n := getNode(t, uuid); n.ProvisionState != "wait call-back" {
			t.Fatalf("after %s the node is %q, want wait call-back", after, n.ProvisionState)
		}
	}

	// The first deploy: a start report, captured and sent again.
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy: %d", code)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	installer("start")
	start := signals(1)[0]
	replayed := logCount("ignored a replayed heartbeat signal")
	resend(t, cli, uuid, start)
	waitLog("ignored a replayed heartbeat signal", replayed+1)
	stillWaiting("the replayed start report")

	installer("end")
	waitState(t, uuid, "active", 60*time.Second)
	sigs := signals(2)
	end := sigs[len(sigs)-1]
	if end.hb != nil && end.hb["agent_status"] != "end" {
		t.Fatalf("the first deploy's last signal is %v, want its end report", end.hb)
	}

	// The rebuild: the first deploy's end report, sent into its wait.
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "rebuild"}, nil); code != 202 {
		t.Fatalf("rebuild: %d", code)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	refused := logCount("another agent token")
	resend(t, cli, uuid, end)
	waitLog("another agent token", refused+1)
	stillWaiting("the first deploy's end report sent again")

	installer("end")
	waitState(t, uuid, "active", 60*time.Second)
}
