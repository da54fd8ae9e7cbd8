package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/devstack"
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
	cli, err := devstack.FindTemporalCLI("")
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
