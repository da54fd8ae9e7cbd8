package tests

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/store"
)

// rolloutDoc is what GET /ironflow/v1/rollouts/{uuid} shows.
type rolloutDoc struct {
	UUID    string `json:"uuid"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Wave    int    `json:"current_wave"`
	Running bool   `json:"running"`
	Runs    int    `json:"runs"`
	Nodes   []struct {
		UUID           string `json:"uuid"`
		Wave           int    `json:"wave"`
		State          string `json:"state"`
		ProvisionState string `json:"provision_state"`
		LastError      string `json:"last_error"`
	} `json:"nodes"`
	Waves     [][]int `json:"waves"`
	Succeeded int     `json:"succeeded"`
	Failed    int     `json:"failed"`
}

func (d rolloutDoc) nodesIn(state string) []string {
	var out []string
	for _, n := range d.Nodes {
		if n.State == state {
			out = append(out, n.UUID)
		}
	}
	return out
}

func getRollout(t *testing.T, id string) rolloutDoc {
	t.Helper()
	var d rolloutDoc
	if code, _ := call(t, "GET", "/ironflow/v1/rollouts/"+id, nil, &d); code != 200 {
		t.Fatalf("GET rollout %s: %d", id, code)
	}
	return d
}

func waitRollout(t *testing.T, id string, timeout time.Duration, cond func(rolloutDoc) bool) rolloutDoc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var d rolloutDoc
	for time.Now().Before(deadline) {
		d = getRollout(t, id)
		if cond(d) {
			return d
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("rollout %s: still %s (wave %d, %d succeeded, %d failed) after %s\nworker log:\n%s", id, d.State, d.Wave, d.Succeeded, d.Failed, timeout, workerLog())
	return d
}

// fakeAvailableNodes enrolls n fake-hardware nodes of resource class rc
// and takes them to available, all at once.
func fakeAvailableNodes(t *testing.T, prefix, rc string, n int) []string {
	t.Helper()
	uuids := make([]string, n)
	for i := range n {
		var nd node
		code, _ := call(t, "POST", "/v1/nodes", map[string]any{"name": fmt.Sprintf("%s-%02d", prefix, i), "driver": "fake-hardware",
			"deploy_interface": "fake", "resource_class": rc}, &nd)
		if code != 201 {
			t.Fatalf("create node: %d", code)
		}
		uuids[i] = nd.UUID
	}
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		var wg sync.WaitGroup
		for _, u := range uuids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, _ := call(t, "PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": s.verb}, nil); code != 202 {
					t.Errorf("%s %s: %d", s.verb, u, code)
				}
			}()
		}
		wg.Wait()
		for _, u := range uuids {
			waitState(t, u, s.state, 60*time.Second)
		}
	}
	return uuids
}

// rolloutRefused creates a rollout of body and checks the API refuses it:
// 400 with want in Ironic's error message.
func rolloutRefused(t *testing.T, body map[string]any, want string) {
	t.Helper()
	var e struct {
		ErrorMessage string `json:"error_message"`
	}
	var fault struct{ Faultstring string }
	code, _ := call(t, "POST", "/ironflow/v1/rollouts", body, &e)
	_ = json.Unmarshal([]byte(e.ErrorMessage), &fault)
	if code != 400 || !strings.Contains(fault.Faultstring, want) {
		t.Errorf("%v: %d %s, want 400 with %q", body, code, e.ErrorMessage, want)
	}
}

// TestRolloutOfFakeDeploysStopsOnItsBudget: 200 fake-hardware nodes, waves
// of 50, a budget of 5 failures; six nodes' deploys fail (an unreadable
// driver_info setting), the sixth in the third wave: the rollout stops in
// that wave with the exact lists, the fourth wave's nodes are never
// touched, the workflow continues as new every 40 starts, and each node's
// history names the rollout. Then an undeploy rollout over the 144
// deployed nodes in waves of 36, paused through the API, resumed through
// `temporal workflow signal`, its worker killed mid-wave, each node
// undeployed exactly once; and the refusals, with nothing started.
func TestRolloutOfFakeDeploysStopsOnItsBudget(t *testing.T) {
	start := time.Now()
	const total, wave, perRun = 200, 50, 40
	nodes := fakeAvailableNodes(t, "rollout", "rollout-test", total)
	t.Logf("%d nodes available in %s", total, time.Since(start).Round(time.Millisecond))
	// The resolved order is by UUID: the waves are cut from it, and the
	// failing nodes are chosen in it (the sixth in the third wave).
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	failSet := map[string]bool{}
	for _, i := range []int{1, 30, 60, 80, 99, 120} {
		failSet[sorted[i]] = true
		if code, _ := call(t, "PATCH", "/v1/nodes/"+sorted[i], []map[string]any{
			{"op": "add", "path": "/driver_info/deploy_callback_timeout", "value": "soon"}}, nil); code != 200 {
			t.Fatalf("patch: %d", code)
		}
	}

	// Bad input first: each is a 400 and starts nothing.
	var before struct {
		Rollouts []struct{ UUID string } `json:"rollouts"`
	}
	call(t, "GET", "/ironflow/v1/rollouts", nil, &before)
	for _, bad := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"operation": map[string]any{"target": "deploy"}, "selector": map[string]any{"resource_class": "no-such-class"}, "wave_size": 5},
			"The rollout's selector matches no node."},
		{map[string]any{"operation": map[string]any{"target": "deploy"}, "selector": map[string]any{"resource_class": "rollout-test"}, "wave_size": 5, "max_failure_percent": 101},
			"Invalid max_failure_percent: 101 is not an integer between 1 and 100"},
		{map[string]any{"operation": map[string]any{"target": "rebuild"}, "selector": map[string]any{"resource_class": "rollout-test"}, "wave_size": 5},
			`The operation "rebuild" is not allowed on 200 of the rollout's nodes`},
		{map[string]any{"operation": map[string]any{"target": "clean"}, "selector": map[string]any{"resource_class": "rollout-test"}, "wave_size": 5},
			`"clean_steps" is required when setting target provision state to clean`},
	} {
		rolloutRefused(t, bad.body, bad.want)
	}

	var created struct{ UUID string }
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts", map[string]any{
		"operation": map[string]any{"target": "active"}, "selector": map[string]any{"resource_class": "rollout-test"},
		"wave_size": wave, "max_failures": 5, "poll_seconds": 0.2, "continue_as_new_after": perRun,
	}, &created); code != 201 {
		t.Fatalf("create rollout: %d", code)
	}
	ran := time.Now()
	d := waitRollout(t, created.UUID, 3*time.Minute, func(d rolloutDoc) bool { return !d.Running })
	t.Logf("the budget rollout ended in %s", time.Since(ran).Round(time.Millisecond))
	if d.State != "failed" || d.Wave != 2 {
		t.Fatalf("rollout %s in wave %d (%s), want failed in wave 2", d.State, d.Wave, d.Reason)
	}
	// 150 starts, 40 per run: the workflow continued as new three times.
	if d.Runs != 4 {
		t.Errorf("the rollout ran %d runs, want 4 (continue_as_new_after %d, %d starts)", d.Runs, perRun, 3*wave)
	}
	for w, idx := range d.Waves {
		if len(idx) != wave {
			t.Errorf("wave %d has %d nodes, want %d", w, len(idx), wave)
		}
	}
	var wantFailed, wantSucceeded []string
	for _, u := range sorted[:3*wave] {
		if failSet[u] {
			wantFailed = append(wantFailed, u)
		} else {
			wantSucceeded = append(wantSucceeded, u)
		}
	}
	if got := d.nodesIn("failed"); !slices.Equal(got, wantFailed) {
		t.Errorf("failed %v, want %v", got, wantFailed)
	}
	if got := d.nodesIn("succeeded"); !slices.Equal(got, wantSucceeded) {
		t.Errorf("succeeded %v, want %v", got, wantSucceeded)
	}
	if got := d.nodesIn("pending"); !slices.Equal(got, sorted[3*wave:]) {
		t.Errorf("pending %v, want the last wave %v", got, sorted[3*wave:])
	}
	for _, n := range d.Nodes {
		if n.State == "failed" && !strings.Contains(n.LastError, "deploy_callback_timeout") {
			t.Errorf("failed node %s: last_error %q", n.UUID, n.LastError)
		}
	}
	for _, u := range sorted[3*wave:] {
		if ps := getNode(t, u).ProvisionState; ps != "available" {
			t.Errorf("node %s of the wave never started is %s", u, ps)
		}
	}
	for _, u := range wantSucceeded {
		if ps := getNode(t, u).ProvisionState; ps != "active" {
			t.Errorf("succeeded node %s is %s", u, ps)
		}
	}
	var hist struct {
		History []struct{ Event, User string } `json:"history"`
	}
	if code, _ := callAt(t, lab.APIURL, "1.78", "GET", "/v1/nodes/"+wantSucceeded[0]+"/history?detail=true", nil, &hist); code != 200 {
		t.Fatalf("history: %d", code)
	}
	named := false
	for _, e := range hist.History {
		named = named || (e.User == "rollout "+created.UUID && strings.Contains(e.Event, `"active" accepted`))
	}
	if !named {
		t.Errorf("node history does not name the rollout: %+v", hist.History)
	}

	// The nodes' own workflows carry the rollout's search attribute, as
	// its workflow does: 150 node workflows and the rollout's 4 runs.
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Skipf("SKIPPED LOUDLY: no temporal CLI for the signal part: %v", err)
	}
	out, err := exec.Command(cli, "workflow", "count", "--address", lab.Temporal.Address(),
		"--query", fmt.Sprintf("RolloutUUID = '%s' AND WorkflowType != 'Rollout'", created.UUID)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("Total: %d", 3*wave)) {
		all, _ := exec.Command(cli, "workflow", "list", "--address", lab.Temporal.Address(),
			"--query", fmt.Sprintf("RolloutUUID = '%s'", created.UUID)).CombinedOutput()
		t.Errorf("node workflows with the rollout's search attribute: %v\n%s\nall of the rollout's:\n%s", err, out, all)
	}

	// Undeploy the deployed nodes in waves of 36, paused through the API
	// at once (at most the first wave starts) and resumed through the
	// temporal CLI.
	var undeploy struct{ UUID string }
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts", map[string]any{
		"operation": map[string]any{"target": "deleted"}, "selector": map[string]any{"nodes": wantSucceeded},
		"wave_size": 36, "soak_seconds": 1, "poll_seconds": 0.2,
	}, &undeploy); code != 201 {
		t.Fatalf("create undeploy rollout: %d", code)
	}
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts/"+undeploy.UUID+"/pause", nil, nil); code != 202 {
		t.Fatalf("pause: %d", code)
	}
	d = waitRollout(t, undeploy.UUID, time.Minute, func(d rolloutDoc) bool { return d.State == "paused" })
	time.Sleep(2 * time.Second) // more than a soak: nothing more may start
	d = getRollout(t, undeploy.UUID)
	started := len(d.Nodes) - len(d.nodesIn("pending"))
	if d.State != "paused" || started > 36 {
		t.Fatalf("paused rollout: state %s, %d nodes started", d.State, started)
	}
	if out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(),
		"--workflow-id", "rollout-"+undeploy.UUID, "--name", "resume").CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal resume: %v\n%s", err, out)
	}
	// The worker killed mid-rollout: the rollout goes on with the new one
	// and each node is undeployed exactly once.
	waitRollout(t, undeploy.UUID, 2*time.Minute, func(d rolloutDoc) bool { return d.Succeeded >= 40 })
	lab.KillWorker()
	if err := lab.StartWorker(); err != nil {
		t.Fatalf("restart the worker: %v", err)
	}
	d = waitRollout(t, undeploy.UUID, 3*time.Minute, func(d rolloutDoc) bool { return !d.Running })
	for _, u := range wantSucceeded {
		var h struct {
			History []struct{ Event, User string } `json:"history"`
		}
		callAt(t, lab.APIURL, "1.78", "GET", "/v1/nodes/"+u+"/history?detail=true", nil, &h)
		n := 0
		for _, e := range h.History {
			if strings.Contains(e.Event, `"deleted" accepted`) {
				n++
				if e.User != "rollout "+undeploy.UUID {
					t.Errorf("node %s: undeploy by %q", u, e.User)
				}
			}
		}
		if n != 1 {
			t.Errorf("node %s undeployed %d times, want once", u, n)
		}
	}
	if d.State != "succeeded" || d.Succeeded != len(wantSucceeded) {
		t.Fatalf("undeploy rollout: %s (%s), %d succeeded of %d", d.State, d.Reason, d.Succeeded, len(wantSucceeded))
	}
	for _, u := range wantSucceeded {
		if ps := getNode(t, u).ProvisionState; ps != "available" {
			t.Errorf("undeployed node %s is %s", u, ps)
		}
	}
	// Both rollouts are listed; an ended one takes no signal.
	var list struct {
		Rollouts []struct{ UUID string } `json:"rollouts"`
	}
	call(t, "GET", "/ironflow/v1/rollouts", nil, &list)
	if len(list.Rollouts) != len(before.Rollouts)+2 {
		t.Errorf("%d rollouts listed, want %d (the refused requests started none)", len(list.Rollouts), len(before.Rollouts)+2)
	}
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts/"+undeploy.UUID+"/abort", nil, nil); code != 404 {
		t.Errorf("abort of an ended rollout: %d, want 404", code)
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

// TestRolloutStopsOnAWavesOwnBudget: 12 fake-hardware nodes in waves of 4
// with a budget of one failure per wave (and none overall): wave 0 with
// one failure passes, wave 1 with two stops the rollout with the reason,
// and wave 2 is never started.
func TestRolloutStopsOnAWavesOwnBudget(t *testing.T) {
	nodes := fakeAvailableNodes(t, "wave-budget", "rollout-wave-budget", 12)
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	failSet := map[string]bool{}
	for _, i := range []int{1, 5, 6} {
		failSet[sorted[i]] = true
		if code, _ := call(t, "PATCH", "/v1/nodes/"+sorted[i], []map[string]any{
			{"op": "add", "path": "/driver_info/deploy_callback_timeout", "value": "soon"}}, nil); code != 200 {
			t.Fatalf("patch: %d", code)
		}
	}
	var created struct{ UUID string }
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts", map[string]any{
		"operation": map[string]any{"target": "active"}, "selector": map[string]any{"resource_class": "rollout-wave-budget"},
		"wave_size": 4, "wave_max_failures": 1, "poll_seconds": 0.2,
	}, &created); code != 201 {
		t.Fatalf("create rollout: %d", code)
	}
	d := waitRollout(t, created.UUID, 2*time.Minute, func(d rolloutDoc) bool { return !d.Running })
	if d.State != "failed" || !strings.Contains(d.Reason, "the failure budget of wave 1 is spent: 2 of its 4 nodes failed (3 nodes failed in all)") {
		t.Fatalf("rollout %s (%s), want failed on wave 1's own budget", d.State, d.Reason)
	}
	var wantFailed []string
	for _, u := range sorted {
		if failSet[u] {
			wantFailed = append(wantFailed, u)
		}
	}
	if got := d.nodesIn("failed"); !slices.Equal(got, wantFailed) {
		t.Errorf("failed %v, want %v", got, wantFailed)
	}
	if got := d.nodesIn("pending"); !slices.Equal(got, sorted[8:]) {
		t.Errorf("pending %v, want wave 2 %v untouched", got, sorted[8:])
	}
	for _, u := range sorted[8:] {
		if n := getNode(t, u); n.ProvisionState != "available" {
			t.Errorf("node %s of wave 2 is %s, want available", u, n.ProvisionState)
		}
	}
}

// TestRolloutOfPowerActions: a rollout whose operation is a power action
// (the body of PUT .../states/power) powers six fake-hardware nodes on,
// then reboots them, wave by wave, each node's power state checked and
// its history naming the rollout; bad power actions are refused with
// the power endpoint's messages.
func TestRolloutOfPowerActions(t *testing.T) {
	nodes := fakeAvailableNodes(t, "power-rollout", "rollout-power", 6)
	for _, bad := range []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"power": map[string]any{"target": "sideways"}}, `A rollout cannot carry out the power target "sideways"`},
		{map[string]any{"power": map[string]any{"target": "power on", "timeout": -1}}, "Invalid timeout value -1. The timeout must be a positive integer."},
		{map[string]any{"power": map[string]any{"target": "power on"}, "target": "active"}, "a power action is"},
		{map[string]any{"power": "power on"}, "Invalid operation.power: 'power on' is not of type 'object'"},
	} {
		rolloutRefused(t, map[string]any{"operation": bad.op, "selector": map[string]any{"resource_class": "rollout-power"}, "wave_size": 3}, bad.want)
	}
	for _, step := range []struct{ target, final string }{{"power on", "power on"}, {"rebooting", "power on"}, {"power off", "power off"}} {
		var created struct{ UUID string }
		if code, _ := call(t, "POST", "/ironflow/v1/rollouts", map[string]any{
			"operation": map[string]any{"power": map[string]any{"target": step.target}},
			"selector":  map[string]any{"resource_class": "rollout-power"}, "wave_size": 3, "poll_seconds": 0.2,
		}, &created); code != 201 {
			t.Fatalf("%s: create rollout: %d", step.target, code)
		}
		d := waitRollout(t, created.UUID, time.Minute, func(d rolloutDoc) bool { return !d.Running })
		if d.State != "succeeded" || len(d.nodesIn("succeeded")) != 6 || len(d.Waves) != 2 {
			t.Fatalf("%s: rollout %s (%s), %d succeeded in %d waves; want succeeded, 6, 2", step.target, d.State, d.Reason, len(d.nodesIn("succeeded")), len(d.Waves))
		}
		for _, u := range nodes {
			n := getNode(t, u)
			if n.PowerState == nil || *n.PowerState != step.final || n.TargetPowerState != nil {
				t.Errorf("%s: node %s power %v (target %v), want %s", step.target, u, deref(n.PowerState), deref(n.TargetPowerState), step.final)
			}
		}
		var hist struct {
			History []struct{ Event, User string } `json:"history"`
		}
		if code, _ := callAt(t, lab.APIURL, "1.78", "GET", "/v1/nodes/"+nodes[0]+"/history?detail=true", nil, &hist); code != 200 {
			t.Fatalf("history: %d", code)
		}
		named := false
		for _, h := range hist.History {
			named = named || h.Event == fmt.Sprintf("Power action \"%s\" accepted", step.target) && h.User == "rollout "+created.UUID
		}
		if !named {
			t.Errorf("%s: the node's history does not name the rollout: %+v", step.target, hist.History)
		}
	}
}

// TestRolloutRendersEachNodesConfigDrive: a deploy rollout's configdrive
// is a template rendered for each node ({{ node.name }}, {{ node.uuid }},
// {{ node.extra.<key> }}): each node's stored config drive holds its own
// values; a node without a value it names is skipped with the reason;
// the template (and its secret) is in no workflow history, and it is
// forgotten when the rollout ends; bad templates are refused.
func TestRolloutRendersEachNodesConfigDrive(t *testing.T) {
	nodes := fakeAvailableNodes(t, "cd-rollout", "rollout-configdrive", 4)
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	for i, u := range sorted[:3] {
		if code, _ := call(t, "PATCH", "/v1/nodes/"+u, []map[string]any{{"op": "add", "path": "/extra/role", "value": fmt.Sprintf("role-%d", i)}}, nil); code != 200 {
			t.Fatalf("patch: %d", code)
		}
	}
	const marker = "MARKER-rollout-secret-5e1d"
	tmpl := map[string]any{
		"meta_data": map[string]any{"hostname": "{{ node.name }}", "role": "{{node.extra.role}}"},
		"user_data": "#!/bin/sh\necho " + marker + " {{ node.uuid }}\n",
	}
	for _, bad := range []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"target": "active", "configdrive": map[string]any{"user_data": "{{ node.password }}"}},
			"Invalid configdrive: the config drive template's placeholder {{ node.password }} is not one of node.uuid, node.name, node.extra.<key>"},
		{map[string]any{"target": "manage", "configdrive": tmpl}, "A configdrive goes with a deploy or a rebuild"},
	} {
		rolloutRefused(t, map[string]any{"operation": bad.op, "selector": map[string]any{"resource_class": "rollout-configdrive"}, "wave_size": 4}, bad.want)
	}
	var created struct {
		UUID string
		Spec map[string]any
	}
	if code, _ := call(t, "POST", "/ironflow/v1/rollouts", map[string]any{
		"operation": map[string]any{"target": "active", "configdrive": tmpl},
		"selector":  map[string]any{"resource_class": "rollout-configdrive"}, "wave_size": 2, "poll_seconds": 0.2,
	}, &created); code != 201 {
		t.Fatalf("create rollout: %d", code)
	}
	if op, _ := created.Spec["operation"].(map[string]any); op["configdrive"] != nil || created.Spec["configdrive_template"] != true {
		t.Errorf("the created rollout shows its config drive: %v", created.Spec)
	}
	d := waitRollout(t, created.UUID, 2*time.Minute, func(d rolloutDoc) bool { return !d.Running })
	if d.State != "succeeded" || len(d.nodesIn("succeeded")) != 3 || fmt.Sprint(d.nodesIn("skipped")) != fmt.Sprint([]string{sorted[3]}) {
		t.Fatalf("rollout %s (%s): succeeded %v, skipped %v; want 3 succeeded and %s skipped", d.State, d.Reason, d.nodesIn("succeeded"), d.nodesIn("skipped"), sorted[3])
	}
	for _, n := range d.Nodes {
		if n.UUID == sorted[3] && !strings.Contains(n.LastError, "names {{ node.extra.role }}, which node "+sorted[3]+" does not have") {
			t.Errorf("skipped node's reason %q", n.LastError)
		}
	}
	st := openStore(t)
	for i, u := range sorted[:3] {
		n, err := st.GetNode(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		drive, _ := n.InstanceInfo["configdrive"].(string)
		raw, err := base64.StdEncoding.DecodeString(drive)
		if err != nil {
			t.Fatalf("node %s: configdrive %.40q: %v", u, drive, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		iso, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{*n.Name, fmt.Sprintf("role-%d", i), marker + " " + u} {
			if !bytes.Contains(iso, []byte(want)) {
				t.Errorf("node %s: its config drive lacks %q", u, want)
			}
		}
		if bytes.Contains(iso, []byte("{{")) {
			t.Errorf("node %s: its config drive holds an unrendered placeholder", u)
		}
	}
	c := temporalClient(t)
	for _, u := range sorted[:3] {
		if _, text := nodeHistories(t, c, u); strings.Contains(text, marker) {
			t.Errorf("node %s: the template's secret is in its workflow history", u)
		}
	}
	var rollout strings.Builder
	it := c.GetWorkflowHistory(context.Background(), "rollout-"+created.UUID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		rollout.WriteString(ev.String())
	}
	if rollout.Len() < 1000 || strings.Contains(rollout.String(), marker) || strings.Contains(rollout.String(), "node.extra.role") {
		t.Errorf("the rollout's history (%d bytes) holds the template", rollout.Len())
	}
	if _, err := st.GetRolloutConfigDrive(context.Background(), created.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the template outlived its rollout: %v", err)
	}
}
