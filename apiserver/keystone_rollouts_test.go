package apiserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/workflows"
)

// ironflow's rollout rules (policy_defaults.go, docs/rollouts.md) persona
// by persona, on real Keystone tokens and a real Temporal server: a
// project member rolls out over the nodes its project owns or leases and
// no other; a project's rollouts are its own to list, read (reader) and
// signal (member); the system's are the system's.

// ksRolloutRoute: the rollout routes, checked by RolloutByPersona.
func ksRolloutRoute(rr routeRule) bool {
	switch rr.kind {
	case onRollout, onRolloutCreate, onRolloutList:
		return true
	}
	return false
}

// ksRolloutEngine is the fake engine for nodes with Temporal's rollouts.
type ksRolloutEngine struct {
	*fakeEngine
	t *TemporalEngine
}

func (e ksRolloutEngine) StartRollout(ctx context.Context, in workflows.RolloutInput) error {
	return e.t.StartRollout(ctx, in)
}
func (e ksRolloutEngine) SignalRollout(ctx context.Context, id, signal string) error {
	return e.t.SignalRollout(ctx, id, signal)
}
func (e ksRolloutEngine) ShowRollout(ctx context.Context, id string) (*workflows.RolloutView, bool, error) {
	return e.t.ShowRollout(ctx, id)
}
func (e ksRolloutEngine) ListRollouts(ctx context.Context, project string) ([]rolloutSummary, error) {
	return e.t.ListRollouts(ctx, project)
}
func (e ksRolloutEngine) RolloutProject(ctx context.Context, id string) (string, error) {
	return e.t.RolloutProject(ctx, id)
}

// rolloutTemporal is a Temporal dev server with ironflow's search
// attributes and a worker running the Rollout workflow whose node
// operations end at once; the rollouts made here wait for an approval
// after their first wave, so they stay running.
func rolloutTemporal(t *testing.T) client.Client {
	t.Helper()
	ctx := context.Background()
	srv, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{UIPort: -1, SearchAttributes: embedded.WorkflowSearchAttributes()},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := worker.New(c, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.Rollout, workflow.RegisterOptions{Name: workflows.WorkflowRollout})
	hw := worker.New(c, workflows.HardwareQueue(""), worker.Options{})
	hw.RegisterActivityWithOptions(func(_ context.Context, in workflows.RolloutResolveInput) ([]string, error) {
		return in.Selector.Nodes, nil
	}, activity.RegisterOptions{Name: workflows.ActRolloutResolve})
	hw.RegisterActivityWithOptions(func(context.Context, workflows.RolloutStartInput) (workflows.RolloutStartResult, error) {
		return workflows.RolloutStartResult{Started: true, Expect: "manageable"}, nil
	}, activity.RegisterOptions{Name: workflows.ActRolloutStartNode})
	hw.RegisterActivityWithOptions(func(_ context.Context, in workflows.RolloutAwaitInput) ([]workflows.RolloutNodeEnd, error) {
		var out []workflows.RolloutNodeEnd
		for _, n := range in.Nodes {
			out = append(out, workflows.RolloutNodeEnd{UUID: n.UUID, OK: true, ProvisionState: "manageable"})
		}
		return out, nil
	}, activity.RegisterOptions{Name: workflows.ActRolloutAwait})
	for _, x := range []worker.Worker{w, hw} {
		if err := x.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Stop)
	}
	return c
}

func (e *ksEnv) rolloutByPersona(t *testing.T) {
	c := rolloutTemporal(t)
	cfg := DefaultConfig()
	cfg.AuthStrategy = AuthKeystone
	cfg.Keystone = e.keystoneConfig(ksSharedCacheCap, "")
	h, err := New(cfg, e.st, ksRolloutEngine{newFakeEngine(e.st), &TemporalEngine{Client: c}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.useServer(t, srv)

	// Two nodes each (a rollout of a canary and a wave waits for its
	// approval, running, after the canary), and another project's node.
	owned, owned2 := e.fixture(e.ownerPID, "", false).node, e.fixture(e.ownerPID, "", false).node
	leased, leased2 := e.fixture("ks-someone-else", e.lessPID, false).node, e.fixture("ks-someone-else", e.lessPID, false).node
	other := e.fixture("ks-someone-else", "", false).node
	if _, err := e.st.Pool().Exec(t.Context(), `UPDATE nodes SET resource_class = 'ks-rollout' WHERE uuid = ANY($1)`, []string{owned, owned2, other}); err != nil {
		t.Fatal(err)
	}
	create := func(p ksPersona, sel map[string]any) resp {
		return e.req(e.tokens[p], "POST", rolloutsRoot, map[string]any{
			"operation": map[string]any{"target": "manage"}, "selector": sel,
			"canary": 1, "wave_size": 1, "approval": true,
		})
	}
	nodesOf := func(r resp) []string {
		var out []string
		spec, _ := r.json(t)["spec"].(map[string]any)
		sel, _ := spec["selector"].(map[string]any)
		for _, n := range sel["nodes"].([]any) {
			out = append(out, n.(string))
		}
		slices.Sort(out)
		return out
	}
	projectOf := func(r resp) any {
		spec, _ := r.json(t)["spec"].(map[string]any)
		return spec["project"]
	}
	sorted := func(xs ...string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }

	// Creating: a project member over what its project owns or leases.
	r := create(pOM, map[string]any{"nodes": []string{owned, owned2}})
	if r.status != http.StatusCreated || projectOf(r) != e.ownerPID {
		t.Fatalf("owner member over its node: %d %s, want 201 with project %s", r.status, r.body, e.ownerPID)
	}
	ownerRollout := r.json(t)["uuid"].(string)
	r = create(pOM, map[string]any{"nodes": []string{owned, other}})
	if want := fmt.Sprintf("Node %s could not be found.", other); r.status != http.StatusNotFound || !strings.Contains(string(r.body), want) {
		t.Errorf("owner member naming another project's node: %d %s, want 404 %q", r.status, r.body, want)
	}
	r = create(pOM, map[string]any{"resource_class": "ks-rollout"})
	if r.status != http.StatusCreated || fmt.Sprint(nodesOf(r)) != fmt.Sprint(sorted(owned, owned2)) {
		t.Errorf("owner member by criteria: %d %s, want 201 over its two nodes alone, not %s", r.status, r.body, other)
	}
	ownerByCriteria := r.json(t)["uuid"]
	r = create(pLM, map[string]any{"nodes": []string{leased, leased2}})
	if r.status != http.StatusCreated || projectOf(r) != e.lessPID {
		t.Fatalf("lessee member over its leased node: %d %s, want 201", r.status, r.body)
	}
	lesseeRollout := r.json(t)["uuid"].(string)
	if r = create(pLM, map[string]any{"nodes": []string{owned}}); r.status != http.StatusNotFound {
		t.Errorf("lessee member over the owner's node: %d %s, want 404", r.status, r.body)
	}
	if r = create(pOR, map[string]any{"nodes": []string{owned}}); r.status != http.StatusForbidden ||
		!strings.Contains(string(r.body), "ironflow:rollout:create") {
		t.Errorf("owner reader creating: %d %s, want 403 naming ironflow:rollout:create", r.status, r.body)
	}
	if r = create(pSR, map[string]any{"nodes": []string{owned}}); r.status != http.StatusForbidden {
		t.Errorf("system reader creating: %d %s, want 403", r.status, r.body)
	}
	r = create(pSA, map[string]any{"nodes": []string{owned, leased, other}})
	if r.status != http.StatusCreated || fmt.Sprint(nodesOf(r)) != fmt.Sprint(sorted(owned, leased, other)) || projectOf(r) != nil {
		t.Fatalf("system admin over every node: %d %s, want 201, no project", r.status, r.body)
	}
	systemRollout := r.json(t)["uuid"].(string)

	// Listing: a project sees its own; the system every one. Visibility
	// catches up with the starts.
	list := func(p ksPersona) []string {
		r := e.req(e.tokens[p], "GET", rolloutsRoot, nil)
		if r.status != 200 {
			t.Fatalf("%s lists rollouts: %d %s", p, r.status, r.body)
		}
		var ids []string
		for _, x := range r.json(t)["rollouts"].([]any) {
			ids = append(ids, x.(map[string]any)["uuid"].(string))
		}
		slices.Sort(ids)
		return ids
	}
	want := map[ksPersona][]string{
		pSA: sorted(ownerRollout, ownerByCriteria.(string), lesseeRollout, systemRollout),
		pSR: sorted(ownerRollout, ownerByCriteria.(string), lesseeRollout, systemRollout),
		pOM: sorted(ownerRollout, ownerByCriteria.(string)),
		pOR: sorted(ownerRollout, ownerByCriteria.(string)),
		pLM: {lesseeRollout},
	}
	for _, p := range ksPersonas {
		deadline := time.Now().Add(20 * time.Second)
		got := list(p)
		for fmt.Sprint(got) != fmt.Sprint(want[p]) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			got = list(p)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[p]) {
			t.Errorf("%s lists %v, want %v", p, got, want[p])
		}
	}

	// Reading and signalling: the rollout's project, or the system.
	type check struct {
		p               ksPersona
		rollout         string
		read, signal    bool
		signalForbidden bool // visible but not to be signalled: 403
	}
	for _, c := range []check{
		{pSA, ownerRollout, true, true, false},
		{pSR, ownerRollout, true, false, true},
		{pOM, ownerRollout, true, true, false},
		{pOR, ownerRollout, true, false, true},
		{pLM, ownerRollout, false, false, false},
		{pOM, systemRollout, false, false, false},
		{pLM, lesseeRollout, true, true, false},
		{pOM, lesseeRollout, false, false, false},
	} {
		name := fmt.Sprintf("%s on %s", c.p, c.rollout)
		r := e.req(e.tokens[c.p], "GET", rolloutsRoot+"/"+c.rollout, nil)
		switch {
		case c.read && r.status != 200:
			t.Errorf("%s: GET %d %s, want 200", name, r.status, r.body)
		case !c.read && (r.status != 404 || !strings.Contains(string(r.body), "Rollout "+c.rollout+" could not be found.")):
			t.Errorf("%s: GET %d %s, want 404 (hidden)", name, r.status, r.body)
		}
		r = e.req(e.tokens[c.p], "POST", rolloutsRoot+"/"+c.rollout+"/pause", nil)
		switch {
		case c.signal && r.status != http.StatusAccepted:
			t.Errorf("%s: pause %d %s, want 202", name, r.status, r.body)
		case c.signalForbidden && (r.status != 403 || !strings.Contains(string(r.body), "ironflow:rollout:update")):
			t.Errorf("%s: pause %d %s, want 403 naming ironflow:rollout:update", name, r.status, r.body)
		case !c.signal && !c.signalForbidden && r.status != 404:
			t.Errorf("%s: pause %d %s, want 404 (hidden)", name, r.status, r.body)
		}
	}
}
