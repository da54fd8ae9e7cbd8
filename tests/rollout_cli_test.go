package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRolloutCLI drives a rollout with `ironflow rollout` on the real
// stack: create from a spec file (a canary of one, then an approval before
// the second wave), show while it waits for the approval, approve, watch
// it to its end (progress lines, then the waves and nodes), list it; a
// signal to an unknown rollout and a spec the API refuses exit non-zero
// with the API's message. The worker's metrics count the rollout and its
// three nodes.
func TestRolloutCLI(t *testing.T) {
	fakeAvailableNodes(t, "rollcli", "rollout-cli", 3)
	// The worker counts rollouts and their nodes (the lab's worker may be
	// replaced by other tests before this one: the counters are read as
	// they are now, and must grow by this rollout's).
	doneBefore := seriesAt(t, labWorkerMetrics, "ironflow_rollouts_finished_total", "outcome=succeeded")
	nodesBefore := seriesAt(t, labWorkerMetrics, "ironflow_rollout_nodes_total", "outcome=succeeded")
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, []byte(`{"operation": {"target": "active"}, "selector": {"resource_class": "rollout-cli"},
		"canary": 1, "wave_size": 2, "approval": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(lab.Bin, append([]string{"rollout", "--api-url", lab.APIURL}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cli("create", spec)
	m := regexp.MustCompile(`rollout ([0-9a-f-]{36}) created over 3 nodes`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	id := m[1]
	waitRollout(t, id, 2*time.Minute, func(d rolloutDoc) bool { return d.State == "awaiting_approval" })
	if out, err := cli("show", id); err != nil || !strings.Contains(out, "awaiting_approval: wave 2/2, 1 of 3 nodes succeeded") {
		t.Fatalf("rollout show while waiting: %v\n%s", err, out)
	}
	if out, err := cli("approve", id); err != nil || !strings.Contains(out, "approve sent") {
		t.Fatalf("rollout approve: %v\n%s", err, out)
	}
	out, err = cli("show", "--watch", "--interval", "200ms", id)
	if err != nil || !strings.Contains(out, "succeeded: wave 2/2, 3 of 3 nodes succeeded, 0 failed") {
		t.Fatalf("rollout show --watch: %v\n%s", err, out)
	}
	if lines := strings.Count(out, "\n"); lines < 8 || strings.Count(out, "active") != 3 {
		t.Errorf("show --watch should end with the waves and the three active nodes:\n%s", out)
	}
	if d := seriesAt(t, labWorkerMetrics, "ironflow_rollouts_finished_total", "outcome=succeeded") - doneBefore; d != 1 {
		t.Errorf("ironflow_rollouts_finished_total{outcome=\"succeeded\"} grew by %v, want 1", d)
	}
	if d := seriesAt(t, labWorkerMetrics, "ironflow_rollout_nodes_total", "outcome=succeeded") - nodesBefore; d != 3 {
		t.Errorf("ironflow_rollout_nodes_total{outcome=\"succeeded\"} grew by %v, want 3", d)
	}
	if out, err := cli("list"); err != nil || !strings.Contains(out, id) {
		t.Errorf("rollout list: %v\n%s", err, out)
	}
	if out, err := cli("abort", "00000000-0000-4000-8000-000000000000"); err == nil || !strings.Contains(out, "404") {
		t.Errorf("abort of an unknown rollout: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"operation": {"target": "active"}, "selector": {"resource_class": "no-such-class"}, "wave_size": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("create", bad); err == nil || !strings.Contains(out, "The rollout's selector matches no node.") {
		t.Errorf("create with a selector matching nothing: %v\n%s", err, out)
	}
	if out, err := cli("frobnicate"); err == nil || !strings.Contains(out, "unknown command") {
		t.Errorf("an unknown command: %v\n%s", err, out)
	}
}
