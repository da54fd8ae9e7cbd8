package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// headerRolloutUser names, on a request a NodeOperator sends to its own
// in-process API, who the node's history records as its user: the
// rollout. Only an operator's server (never one that listens) reads it.
const headerRolloutUser = "X-Ironflow-Rollout-User"

// headerRollout names the rollout itself on those requests: the node's
// workflow starts with its search attribute (workflows.SearchAttrRollout).
const headerRollout = "X-Ironflow-Rollout"

// ctxRollout keeps headerRollout's value on the gin context.
const ctxRollout = "ironflow.rollout"

// NodeOperator carries out a rollout's node operations (docs/rollouts.md)
// through the API's own provision path: each node's request is PUT
// /v1/nodes/{node}/states/provision served in process by an API server of
// its own, so the decision (decideProvision), the conditional state write
// and the start of the node's workflow are the same as for a person, and
// so are the node lock and every refusal. Its methods are the Rollout
// workflow's activities (worker.New registers them).
type NodeOperator struct {
	s       *server
	handler http.Handler
}

// NewNodeOperator builds the operator of a worker process. Its server
// answers no one but the operator: it authenticates nobody (the rollout's
// creator was authorized when the API created the rollout).
func NewNodeOperator(cfg Config, st *store.Store, eng Engine, log *slog.Logger) (*NodeOperator, error) {
	cfg.AuthStrategy = AuthNoAuth
	s, err := newServer(cfg, st, eng, log)
	if err != nil {
		return nil, err
	}
	s.internal = true
	return &NodeOperator{s: s, handler: s.routes()}, nil
}

// rolloutUser is the user a rollout's node requests are recorded under.
func rolloutUser(rolloutUUID string) string { return "rollout " + rolloutUUID }

// Resolve answers the rollout's selector: the nodes it names, in UUID
// order, once (the workflow records the answer).
func (o *NodeOperator) Resolve(ctx context.Context, in workflows.RolloutResolveInput) ([]string, error) {
	return resolveSelector(ctx, o.s.store, in.Selector)
}

// resolveSelector lists the nodes a selector names. Explicit nodes are
// taken by UUID or name and keep their order; the other criteria filter.
func resolveSelector(ctx context.Context, st *store.Store, sel workflows.RolloutSelector) ([]string, error) {
	f := store.NodeFilter{
		ProvisionState: provision.State(sel.ProvisionState), ResourceClass: sel.ResourceClass,
		ConductorGroup: sel.ConductorGroup, Owner: sel.Owner, SortKey: "uuid",
		Fields: []string{"uuid", "name", "traits"},
	}
	if sel.Shard != "" {
		f.Shards = []string{sel.Shard}
	}
	nodes, err := st.ListNodes(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list the nodes of the selector: %w", err)
	}
	match := func(n *store.Node) bool {
		for _, t := range sel.Traits {
			if !slices.Contains(n.Traits, t) {
				return false
			}
		}
		return true
	}
	var out []string
	if len(sel.Nodes) > 0 {
		byID := map[string]*store.Node{}
		for _, n := range nodes {
			byID[n.UUID] = n
			if n.Name != nil {
				byID[*n.Name] = n
			}
		}
		seen := map[string]bool{}
		for _, id := range sel.Nodes {
			if n, ok := byID[id]; ok && match(n) && !seen[n.UUID] {
				seen[n.UUID] = true
				out = append(out, n.UUID)
			}
		}
		return out, nil
	}
	for _, n := range nodes {
		if match(n) {
			out = append(out, n.UUID)
		}
	}
	return out, nil
}

// StartNode sends the rollout's operation to one node. A request the API
// refuses is not an error of the activity: its message is the node's
// reason to be skipped. A node that another operation holds (409) or that
// is in maintenance is Busy. Retried after a crash, the attempt first
// looks whether its request was already accepted (the node's history
// names the rollout in the current run of the node), so that no node is
// changed twice.
func (o *NodeOperator) StartNode(ctx context.Context, in workflows.RolloutStartInput) (workflows.RolloutStartResult, error) {
	n, err := o.s.store.GetNode(ctx, in.Node)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.RolloutStartResult{Error: fmt.Sprintf("Node %s could not be found.", in.Node)}, nil
	}
	if err != nil {
		return workflows.RolloutStartResult{}, err
	}
	if power, ok := workflows.RolloutPowerAction(in.Operation); ok {
		return o.startPower(ctx, n, in, power)
	}
	verb := provision.ParseVerb(fmt.Sprint(in.Operation["target"]))
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 {
		if ok, expect, err := o.acceptedBefore(ctx, n, in); err != nil {
			return workflows.RolloutStartResult{}, err
		} else if ok {
			return workflows.RolloutStartResult{Started: true, Expect: expect}, nil
		}
	}
	if n.Maintenance {
		return workflows.RolloutStartResult{Busy: true, Error: fmt.Sprintf("Node %s is in maintenance mode.", n.UUID)}, nil
	}
	expect := ""
	if t, ok := provision.Accept(n.ProvisionState, verb); ok {
		expect = string(t.Target)
		if expect == "" {
			expect = string(t.Next)
		}
	}
	op := in.Operation
	if in.ConfigDriveTemplate {
		// The node's own config drive, rendered from the kept template:
		// it travels in this request only, as a person's would.
		tmpl, err := o.s.store.GetRolloutConfigDrive(ctx, in.Rollout)
		if errors.Is(err, store.ErrNotFound) {
			return workflows.RolloutStartResult{Error: "the rollout's config drive template is gone (the rollout ended)"}, nil
		}
		if err != nil {
			return workflows.RolloutStartResult{}, err
		}
		cd, err := renderConfigDrive(tmpl, n)
		if err != nil {
			return workflows.RolloutStartResult{Error: err.Error()}, nil
		}
		op = maps.Clone(op)
		op["configdrive"] = cd
	}
	rec, err := o.put(ctx, "/v1/nodes/"+n.UUID+"/states/provision", in.Rollout, op)
	if err != nil {
		return workflows.RolloutStartResult{}, err
	}
	switch {
	case rec.Code == http.StatusAccepted:
		return workflows.RolloutStartResult{Started: true, Expect: expect}, nil
	case rec.Code == http.StatusConflict:
		return workflows.RolloutStartResult{Busy: true, Error: FaultString(rec.Body.Bytes())}, nil
	case rec.Code >= 500:
		return workflows.RolloutStartResult{}, fmt.Errorf("node %s: the API answered %d: %s", n.UUID, rec.Code, FaultString(rec.Body.Bytes()))
	default:
		return workflows.RolloutStartResult{Error: FaultString(rec.Body.Bytes())}, nil
	}
}

// put sends body to path on the operator's own API, as the rollout (the
// node's history records the rollout as its user, and the node's
// workflow starts with the rollout's search attribute).
func (o *NodeOperator) put(ctx context.Context, path, rollout string, body any) (*httptest.ResponseRecorder, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPut, path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerVersion, "latest")
	req.Header.Set(headerRolloutUser, rolloutUser(rollout))
	req.Header.Set(headerRollout, rollout)
	rec := httptest.NewRecorder()
	o.handler.ServeHTTP(rec, req)
	return rec, nil
}

// Forget drops the rollout's config drive template when it ends.
func (o *NodeOperator) Forget(ctx context.Context, rolloutUUID string) error {
	return o.s.store.DeleteRolloutConfigDrive(ctx, rolloutUUID)
}

// configDrivePlaceholder is a placeholder of a rollout's config drive
// template: {{ node.uuid }}, {{ node.name }}, {{ node.extra.<key> }}.
var configDrivePlaceholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// checkConfigDriveTemplate refuses a template naming anything but the
// node's uuid, name or extra keys.
func checkConfigDriveTemplate(v any) error {
	var err error
	walkStrings(v, func(s string) string {
		for _, m := range configDrivePlaceholder.FindAllStringSubmatch(s, -1) {
			if !validPlaceholder(m[1]) && err == nil {
				err = fmt.Errorf("the config drive template's placeholder {{ %s }} is not one of node.uuid, node.name, node.extra.<key>", m[1])
			}
		}
		return s
	})
	return err
}

func validPlaceholder(p string) bool {
	if p == "node.uuid" || p == "node.name" {
		return true
	}
	k, ok := strings.CutPrefix(p, "node.extra.")
	return ok && k != ""
}

// renderConfigDrive is the template with every placeholder replaced by
// the node's value; a placeholder the node has no value for is an error
// naming it (the node is then skipped, not deployed without it).
func renderConfigDrive(tmpl any, n *store.Node) (any, error) {
	var err error
	out := walkStrings(tmpl, func(s string) string {
		return configDrivePlaceholder.ReplaceAllStringFunc(s, func(ph string) string {
			p := configDrivePlaceholder.FindStringSubmatch(ph)[1]
			switch {
			case p == "node.uuid":
				return n.UUID
			case p == "node.name" && n.Name != nil:
				return *n.Name
			case strings.HasPrefix(p, "node.extra."):
				if v, ok := n.Extra[strings.TrimPrefix(p, "node.extra.")]; ok && v != nil {
					return fmt.Sprint(v)
				}
			}
			if err == nil {
				err = fmt.Errorf("the config drive template names {{ %s }}, which node %s does not have", p, n.UUID)
			}
			return ph
		})
	})
	return out, err
}

// walkStrings copies v (decoded JSON) with f applied to every string.
func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = walkStrings(e, f)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = walkStrings(e, f)
		}
		return l
	}
	return v
}

// startPower sends a rollout's power action to one node: PUT
// /v1/nodes/{node}/states/power through the API's own path. Retried after
// a crash, an attempt whose request was accepted before (the node's
// target_power_state is the action's, or its power already what the
// action ends in) does not send it again.
func (o *NodeOperator) startPower(ctx context.Context, n *store.Node, in workflows.RolloutStartInput, power map[string]any) (workflows.RolloutStartResult, error) {
	target := fmt.Sprint(power["target"])
	final := "power on"
	if target == "power off" || target == "soft power off" {
		final = "power off"
	}
	expect := workflows.RolloutPowerExpect + final
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 {
		if (n.TargetPowerState != nil && *n.TargetPowerState == final) || o.poweredBefore(ctx, n, in, target) {
			return workflows.RolloutStartResult{Started: true, Expect: expect}, nil
		}
	}
	if n.Maintenance {
		return workflows.RolloutStartResult{Busy: true, Error: fmt.Sprintf("Node %s is in maintenance mode.", n.UUID)}, nil
	}
	rec, err := o.put(ctx, "/v1/nodes/"+n.UUID+"/states/power", in.Rollout, power)
	if err != nil {
		return workflows.RolloutStartResult{}, err
	}
	fault := FaultString(rec.Body.Bytes())
	switch {
	case rec.Code == http.StatusAccepted:
		return workflows.RolloutStartResult{Started: true, Expect: expect}, nil
	case rec.Code == http.StatusConflict && strings.Contains(fault, "locked"):
		return workflows.RolloutStartResult{Busy: true, Error: fault}, nil
	case rec.Code >= 500:
		return workflows.RolloutStartResult{}, fmt.Errorf("node %s: the API answered %d: %s", n.UUID, rec.Code, fault)
	default:
		return workflows.RolloutStartResult{Error: fault}, nil
	}
}

// poweredBefore reports whether the node's history has this rollout's
// power action accepted (an attempt before this one got the 202 but its
// answer was lost, and the action has ended since).
func (o *NodeOperator) poweredBefore(ctx context.Context, n *store.Node, in workflows.RolloutStartInput, target string) bool {
	events, err := o.s.store.ListHistory(ctx, n.UUID)
	if err != nil {
		return false
	}
	want := fmt.Sprintf("Power action \"%s\" accepted", target)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Event == want && events[i].User == rolloutUser(in.Rollout) {
			return true
		}
	}
	return false
}

// acceptedBefore reports whether the node's latest provision request the
// API decided (actProvision's "accepted" event, or revertTransition's "not
// started") is this rollout's accepted one: an attempt before this one got
// the 202 but its answer was lost. The workflow's own events in between
// (their user empty) do not count.
func (o *NodeOperator) acceptedBefore(ctx context.Context, n *store.Node, in workflows.RolloutStartInput) (bool, string, error) {
	events, err := o.s.store.ListHistory(ctx, n.UUID)
	if err != nil {
		return false, "", err
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if !strings.HasPrefix(e.Event, "Provision action \"") {
			continue
		}
		accepted := strings.Contains(e.Event, "\" accepted in state \"")
		if !accepted && !strings.Contains(e.Event, "\" not started (") {
			continue
		}
		if !accepted || e.User != rolloutUser(in.Rollout) {
			return false, "", nil
		}
		// actProvision's words: ...; moving to "<next>" with target "<target>".
		expect := ""
		if m := acceptedEventRE.FindStringSubmatch(e.Event); m != nil {
			expect = m[2]
			if expect == "" {
				expect = m[1]
			}
		}
		return true, expect, nil
	}
	return false, "", nil
}

var acceptedEventRE = regexp.MustCompile(`; moving to "([^"]*)" with target "([^"]*)"$`)

// Await returns the nodes among in.Nodes whose operations have ended, as
// soon as there is one, or none after a minute (the workflow asks again).
// An operation has ended when its node is in a settled state (the
// workflow writes it no more) or a failure state; it succeeded when that
// state is the one its transition targets and is no failure.
func (o *NodeOperator) Await(ctx context.Context, in workflows.RolloutAwaitInput) ([]workflows.RolloutNodeEnd, error) {
	poll := time.Duration(in.PollSeconds * float64(time.Second))
	if poll <= 0 {
		poll = time.Second
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var ends []workflows.RolloutNodeEnd
		for _, w := range in.Nodes {
			n, err := o.s.store.GetNodeColumns(ctx, w.UUID, awaitColumns)
			if errors.Is(err, store.ErrNotFound) {
				ends = append(ends, workflows.RolloutNodeEnd{UUID: w.UUID, LastError: "the node was deleted"})
				continue
			}
			if err != nil {
				return nil, err
			}
			if final, isPower := strings.CutPrefix(w.Expect, workflows.RolloutPowerExpect); isPower {
				// A power action has ended when no power target is left
				// (the power workflow clears it at its end).
				if n.TargetPowerState != nil {
					continue
				}
				e := workflows.RolloutNodeEnd{UUID: w.UUID, ProvisionState: string(n.ProvisionState)}
				if n.PowerState != nil && *n.PowerState == final {
					e.OK = true
				} else {
					got := "None"
					if n.PowerState != nil {
						got = *n.PowerState
					}
					e.LastError = fmt.Sprintf("the power action ended with the node %s, not %s", got, final)
					if n.LastError != nil && *n.LastError != "" {
						e.LastError = *n.LastError
					}
				}
				ends = append(ends, e)
				continue
			}
			ps := n.ProvisionState
			if !ps.Settled() && !ps.Failed() {
				continue
			}
			e := workflows.RolloutNodeEnd{UUID: w.UUID, ProvisionState: string(ps)}
			if n.LastError != nil {
				e.LastError = *n.LastError
			}
			e.OK = !ps.Failed() && (w.Expect == "" || string(ps) == w.Expect)
			if !e.OK && e.LastError == "" {
				e.LastError = fmt.Sprintf("the operation ended in state %q, not %q", ps, w.Expect)
			}
			ends = append(ends, e)
		}
		if len(ends) > 0 || time.Now().After(deadline) {
			return ends, nil
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

var awaitColumns = store.MustNodeColumns("provision_state", "last_error", "power_state", "target_power_state")
