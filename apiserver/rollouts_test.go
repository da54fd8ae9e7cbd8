package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestRolloutSpecRefusals: every field of POST /ironflow/v1/rollouts out of
// its range or of the wrong type is a 400 naming it; a good body gives the
// spec with its defaults.
func TestRolloutSpecRefusals(t *testing.T) {
	good := `{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5}`
	for _, c := range []struct{ body, want string }{
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}}`, `Missing argument: "wave_size"`},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 0}`, "Invalid wave_size: 0 is not an integer between 1 and"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 2.5}`, "Invalid wave_size: 2.5"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "max_failures": -1}`, "Invalid max_failures: -1"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "max_failure_percent": 0}`, "Invalid max_failure_percent: 0"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "soak_seconds": "1"}`, "Invalid soak_seconds: '1'"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "on_busy": "later"}`, "Invalid on_busy: 'later' is not one of 'skip', 'wait'"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "on_refused": 1}`, "Invalid on_refused: 1"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "poll_seconds": 10}`, "Invalid poll_seconds: 10"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "approval": "yes"}`, "Invalid approval: 'yes' is not a boolean"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "rolling": 1}`, "Invalid rolling: 1 is not a boolean"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "wave_max_failures": 0}`, "Invalid wave_max_failures: 0 is not an integer between 1 and"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "wave_max_failure_percent": 101}`, "Invalid wave_max_failure_percent: 101 is not an integer between 1 and 100"},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "rolling": true, "soak_seconds": 60}`, "Invalid rolling: rolling waves have no soak time or approval between them (soak_seconds 60, approval false)."},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "rolling": true, "approval": true}`, "Invalid rolling: rolling waves have no soak time or approval between them (soak_seconds 0, approval true)."},
		{`{"operation": {"target": "active"}, "selector": {"resource_class": "gpu"}, "wave_size": 5, "waves": 3}`, `Unknown argument: "waves"`},
		{`{"operation": {"target": "abort"}, "selector": {"resource_class": "gpu"}, "wave_size": 5}`, `A rollout cannot carry out the provision target "abort".`},
		{`{"operation": {"target": "rescue", "rescue_password": "x"}, "selector": {"resource_class": "gpu"}, "wave_size": 5}`, `cannot carry out the provision target "rescue"`},
		{`{"operation": "deploy", "selector": {"resource_class": "gpu"}, "wave_size": 5}`, "Invalid operation: 'deploy' is not of type 'object'"},
		{`{"operation": {}, "selector": {"resource_class": "gpu"}, "wave_size": 5}`, `Missing argument: "operation.target"`},
		{`{"operation": {"target": "active"}, "selector": {}, "wave_size": 5}`, "Invalid selector: name nodes, or at least one of"},
		{`{"operation": {"target": "active"}, "selector": {"rack": "r1"}, "wave_size": 5}`, `Invalid selector: json: unknown field "rack"`},
	} {
		_, _, err := parseRolloutSpec(decodeBody(t, c.body))
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != 400 || !strings.Contains(ae.Error(), c.want) {
			t.Errorf("%s: %v, want 400 with %q", c.body, err, c.want)
		}
	}
	spec, onRefused, err := parseRolloutSpec(decodeBody(t, good))
	if err != nil {
		t.Fatal(err)
	}
	if spec.WaveSize != 5 || spec.MaxFailures != -1 || spec.OnBusy != "skip" || spec.ContinueAsNewAfter != defaultContinueAsNewAfter || onRefused != "refuse" {
		t.Errorf("defaults: %+v, on_refused %q", spec, onRefused)
	}
}

// TestRolloutOperationCheckedAsTheProvisionEndpoint: the operation is
// refused with the provision endpoint's own messages; a config drive is a
// template, checked as that endpoint checks one, for deploys and rebuilds
// only, with known placeholders.
func TestRolloutOperationCheckedAsTheProvisionEndpoint(t *testing.T) {
	s := &server{}
	for _, c := range []struct {
		op   map[string]any
		want string
	}{
		{map[string]any{"target": "clean"}, `"clean_steps" is required when setting target provision state to clean`},
		{map[string]any{"target": "active", "clean_steps": []any{}}, `"clean_steps" is only valid when setting target provision state to clean`},
		{map[string]any{"target": "active", "configdrive": "aGVsbG8="}, "Invalid configdrive format: configdrive is base64 but not gzip"},
		{map[string]any{"target": "manage", "configdrive": map[string]any{"user_data": "x"}}, "A configdrive goes with a deploy or a rebuild (target active, deploy or rebuild), not 'manage'."},
		{map[string]any{"target": "active", "configdrive": map[string]any{"user_data": "{{ node.secret }}"}}, "placeholder {{ node.secret }} is not one of node.uuid, node.name, node.extra.<key>"},
		{map[string]any{"target": "active", "bogus": 1}, `Unknown argument: "bogus"`},
	} {
		err := s.checkRolloutOperation(c.op)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != 400 || !strings.Contains(ae.Error(), c.want) {
			t.Errorf("%v: %v, want 400 with %q", c.op, err, c.want)
		}
	}
	if err := s.checkRolloutOperation(map[string]any{"target": "service", "service_steps": []any{map[string]any{"interface": "bios", "step": "apply_configuration"}}}); err != nil {
		t.Errorf("a service operation: %v", err)
	}
}

// decodeBody decodes a JSON object as the API does (numbers as
// json.Number).
func decodeBody(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body
}

// TestNodeOperatorStartsThroughTheProvisionPath: the operator's start is
// the API's provision request (the transition recorded, the workflow
// started with the rollout named, the history's user the rollout); a
// second start of the same node is refused as a person's would be; a
// retried start finds the accepted request and does not send it again;
// a node in maintenance is busy.
func TestNodeOperatorStartsThroughTheProvisionPath(t *testing.T) {
	e := newEnv(t)
	op, err := NewNodeOperator(DefaultConfig(), e.st, e.eng, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, provision.Available)
	in := workflows.RolloutStartInput{Rollout: "r-1", Node: uuid, Operation: map[string]any{"target": "active"}}
	res, err := op.StartNode(ctx, in)
	if err != nil || !res.Started || res.Expect != "active" {
		t.Fatalf("start: %+v, %v", res, err)
	}
	if n := e.node(uuid); n.ProvisionState != provision.Deploying {
		t.Errorf("state %s after the start, want deploying", n.ProvisionState)
	}
	if len(e.eng.provisions) != 1 || e.eng.provisions[0].Rollout != "r-1" {
		t.Fatalf("workflows started: %+v", e.eng.provisions)
	}
	ok, expect, err := op.acceptedBefore(ctx, e.node(uuid), in)
	if err != nil || !ok || expect != "active" {
		t.Errorf("acceptedBefore after the start: %v %q %v", ok, expect, err)
	}
	if ok, _, _ := op.acceptedBefore(ctx, e.node(uuid), workflows.RolloutStartInput{Rollout: "r-2", Node: uuid}); ok {
		t.Error("another rollout's retry found its request accepted")
	}
	// Sent again (a start whose answer was lost, retried without the
	// check): refused with the API's words, nothing started.
	res, err = op.StartNode(ctx, in)
	if err != nil || res.Started || !strings.Contains(res.Error, "deploying") {
		t.Errorf("second start: %+v, %v", res, err)
	}
	if len(e.eng.provisions) != 1 {
		t.Errorf("%d workflows started, want 1", len(e.eng.provisions))
	}
	// In maintenance: busy.
	other := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(other, provision.Available)
	if _, err := e.st.UpdateNode(ctx, other, func(n *store.Node) error { n.Maintenance = true; return nil }); err != nil {
		t.Fatal(err)
	}
	res, err = op.StartNode(ctx, workflows.RolloutStartInput{Rollout: "r-1", Node: other, Operation: map[string]any{"target": "active"}})
	if err != nil || !res.Busy || res.Started {
		t.Errorf("node in maintenance: %+v, %v", res, err)
	}
}
