package tests

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
)

// TestChecksumMismatchThenOperatorRetry: a wrong checksum fails the deploy
// with a last_error that names it; the operator fixes instance_info and sends
// `temporal workflow signal --name retry` (the real temporal CLI, as
// docs/operator-guide.md says); the deploy ends active.
func TestChecksumMismatchThenOperatorRetry(t *testing.T) {
	img := newImageServer(t, 2<<20)
	uuid := enrollAgentNode(t, "checksum-node-0", "52:54:00:bb:00:05", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("0", 64)},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:05"}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "deploy failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	n := getNode(t, uuid)
	if !strings.Contains(deref(n.LastError), "write_image") || !strings.Contains(strings.ToLower(deref(n.LastError)), "checksum") {
		t.Fatalf("last_error %q should name write_image and the checksum", deref(n.LastError))
	}
	// The operator's view: the status query says what it waits for.
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	// Its answer is encrypted (package payload): the operator reads it
	// through the codec server.
	codec, codecAuth := labCodecServer(t)
	out, err := exec.Command(cli, "workflow", "query", "--address", lab.Temporal.Address(), "--workflow-id", "node-"+uuid, "--type", "status",
		"--codec-endpoint", codec, "--codec-auth", codecAuth).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "retry, skip-step or abort") {
		t.Fatalf("status query: %v\n%s", err, out)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": img.sha256},
	}, nil); code != 200 {
		t.Fatalf("fix instance_info: %d", code)
	}
	if out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(), "--workflow-id", "node-"+uuid, "--name", "retry").CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal retry: %v\n%s", err, out)
	}
	waitFor(t, "the retry to leave deploy failed", 60*time.Second, func() bool { return getNode(t, uuid).ProvisionState != "deploy failed" })
	n = waitState(t, uuid, "active", 120*time.Second)
	if n.LastError != nil {
		t.Errorf("last_error kept after the retry succeeded: %q", *n.LastError)
	}
}

// TestUndeployAFailedDeployThatWaitsForAnOperator: the failed deploy's
// workflow waits for retry/skip-step/abort, but `baremetal node undeploy`
// is the operator's answer too: it ends the wait and cleans the node up.
// The node's history says the undeploy ended the wait, at INFO; no ERROR
// event says the deploy was aborted.
func TestUndeployAFailedDeployThatWaitsForAnOperator(t *testing.T) {
	uuid := failedDeployNode(t, "failed-undeploy-node-0", "52:54:00:bb:00:06")
	mustCLI(t, "node", "undeploy", uuid, "--wait", "120")
	if n := getNode(t, uuid); n.ProvisionState != "available" {
		t.Fatalf("after undeploy: %+v", n)
	}
	var hist struct {
		History []struct{ Severity, Event string } `json:"history"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/history", nil, &hist); code != 200 {
		t.Fatalf("history: HTTP %d", code)
	}
	var errs []string
	ended := false
	for _, e := range hist.History {
		if e.Severity == "ERROR" {
			errs = append(errs, e.Event)
		}
		if strings.Contains(e.Event, `Provision action "deleted" requested in state "deploy failed": the wait for retry, skip-step or abort ended`) && e.Severity == "INFO" {
			ended = true
		}
	}
	if !ended || len(errs) == 0 || strings.Contains(strings.Join(errs, "\n"), "abort") {
		t.Fatalf("history: the undeploy's end of the wait at INFO %v, ERROR events %q; want it, and the failure's errors without an abort:\n%+v", ended, errs, hist.History)
	}
}
