package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// The reconciler: one long-running workflow per conductor group that
// compares the group's nodes with their workflows and mends every mismatch
// it can prove (docs/crash-safety.md, "The reconciler"). A pass is two
// activities on the group's hardware queue: the first reads the store and
// Temporal's visibility and hands back only the nodes and workflows that may
// disagree (ReconcileFacts); the workflow decides each repair
// (DecideRepairs, a pure function); the second applies them under the
// node's lock. A pass runs at start-up, then every Interval on a durable
// timer; continue-as-new every IterationsPerRun passes keeps the history
// bounded, and so does MaxCandidates per pass.
const (
	// WorkflowReconcile is the name Reconcile is registered and started by.
	WorkflowReconcile = "Reconcile"
	// ActReconcileFacts reads one pass's candidates (regular, on the
	// group's hardware queue).
	ActReconcileFacts = "ReconcileFacts"
	// ActReconcileRepair applies one pass's repairs (regular, on the
	// group's hardware queue).
	ActReconcileRepair = "ReconcileRepair"
	// QueryReconcileStatus answers a ReconcileStatus.
	QueryReconcileStatus = "reconcile-status"
	// SignalReconcileNow starts a pass at once instead of at the end of
	// the interval: every worker sends it at start-up, so that a pass
	// follows each start of the control plane.
	SignalReconcileNow = "reconcile-now"
)

// Named defaults of the reconciler (docs/configuration.md).
const (
	// DefaultReconcileInterval is the time between two passes.
	DefaultReconcileInterval = 5 * time.Minute
	// DefaultReconcileGrace: a node is judged only once its state is this
	// old, so that the moment between the API's state write and its
	// workflow start (and visibility's lag behind a start) is never
	// mistaken for a lost start.
	DefaultReconcileGrace = 2 * time.Minute
	// DefaultReconcileLookback is how far back closed workflows are read:
	// a database restored from a backup older than this is mended only as
	// far as the closed workflows of the window show.
	DefaultReconcileLookback = 7 * 24 * time.Hour
	// DefaultReconcileMaxCandidates bounds the nodes and workflows one pass
	// hands to the workflow; the rest wait for the next pass.
	DefaultReconcileMaxCandidates = 500
	// DefaultReconcilePassTimeout bounds one activity of a pass.
	DefaultReconcilePassTimeout = 10 * time.Minute
	// DefaultReconcileIterations is how many passes one run does before it
	// continues as new.
	DefaultReconcileIterations = 50
)

// ReconcileWorkflowID is the one reconciler of a conductor group
// ("reconcile-default" for the empty group).
func ReconcileWorkflowID(conductorGroup string) string {
	if conductorGroup == "" {
		conductorGroup = "default"
	}
	return "reconcile-" + conductorGroup
}

// ReconcileInput configures one group's reconciler; zero values take the
// named defaults.
type ReconcileInput struct {
	ConductorGroup   string        `json:"conductor_group"`
	Interval         time.Duration `json:"interval"`
	Grace            time.Duration `json:"grace"`
	Lookback         time.Duration `json:"lookback"`
	MaxCandidates    int           `json:"max_candidates"`
	PassTimeout      time.Duration `json:"pass_timeout"`
	IterationsPerRun int           `json:"iterations_per_run"`
	// Continued is set on the runs after the first: the start-up pass is
	// the first run's.
	Continued bool `json:"continued,omitempty"`
}

func (in ReconcileInput) withDefaults() ReconcileInput {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&in.Interval, DefaultReconcileInterval)
	def(&in.Grace, DefaultReconcileGrace)
	def(&in.Lookback, DefaultReconcileLookback)
	def(&in.PassTimeout, DefaultReconcilePassTimeout)
	if in.MaxCandidates <= 0 {
		in.MaxCandidates = DefaultReconcileMaxCandidates
	}
	if in.IterationsPerRun <= 0 {
		in.IterationsPerRun = DefaultReconcileIterations
	}
	return in
}

// ReconcileScan asks for one pass's facts.
type ReconcileScan struct {
	ConductorGroup string        `json:"conductor_group"`
	Grace          time.Duration `json:"grace"`
	Lookback       time.Duration `json:"lookback"`
	MaxCandidates  int           `json:"max_candidates"`
}

// ReconcileFacts is what a pass read: counts of everything, and the facts
// of the candidates only, so that the history stays small whatever the
// group's size.
type ReconcileFacts struct {
	// At is when the facts were read (the activity's clock).
	At time.Time `json:"at"`
	// Nodes of the group read; Held of them had a running workflow.
	Nodes int `json:"nodes"`
	Held  int `json:"held"`
	// Workflows: node workflow runs read from visibility.
	Workflows int `json:"workflows"`
	// Candidates may disagree with their workflows (at most MaxCandidates).
	Candidates []NodeFacts `json:"candidates,omitempty"`
	// Orphans are running node workflows whose node row is gone.
	Orphans []OrphanRun `json:"orphans,omitempty"`
	// Deferred candidates were left for the next pass.
	Deferred int `json:"deferred,omitempty"`
}

// NodeFacts is one node as the store and Temporal show it.
type NodeFacts struct {
	NodeUUID string          `json:"node_uuid"`
	State    provision.State `json:"state"`
	Target   provision.State `json:"target,omitempty"`
	// StateSince is the node's provision_updated_at: when it entered State.
	StateSince time.Time `json:"state_since"`
	// Accepted is the node's last history event when that is the API's
	// acceptance of a verb (provision.AcceptedEvent), AcceptedAt its time.
	Accepted   *provision.Accepted `json:"accepted,omitempty"`
	AcceptedAt time.Time           `json:"accepted_at,omitempty"`
	// Last is the node's latest workflow run in the lookback window; nil
	// when there is none.
	Last *RunFacts `json:"last,omitempty"`
}

// RunFacts is one workflow run of a node, from Temporal's visibility.
type RunFacts struct {
	WorkflowType string              `json:"workflow_type"`
	RunID        string              `json:"run_id"`
	Operation    provision.Operation `json:"operation,omitempty"`
	// State is the run's ProvisionState search attribute: the last state
	// it recorded (or the API's, if it recorded none).
	State   provision.State `json:"state,omitempty"`
	Running bool            `json:"running"`
	Status  string          `json:"status"`
	Started time.Time       `json:"started"`
	Closed  time.Time       `json:"closed,omitempty"`
}

// OrphanRun is a running node workflow whose node does not exist.
type OrphanRun struct {
	NodeUUID     string    `json:"node_uuid"`
	RunID        string    `json:"run_id"`
	WorkflowType string    `json:"workflow_type"`
	Started      time.Time `json:"started"`
}

// RepairKind names a repair; it is also the metric's kind label.
type RepairKind string

// The repairs.
const (
	// RepairRestart starts the workflow of a verb the API accepted but
	// never started.
	RepairRestart RepairKind = "restart"
	// RepairFail moves a node in a transient state that no workflow holds
	// to the state's failure state, with a last_error saying why.
	RepairFail RepairKind = "fail"
	// RepairCorrect records the state the node's finished workflow
	// recorded last, where the node's row says otherwise.
	RepairCorrect RepairKind = "correct"
	// RepairEndOrphan terminates a workflow whose node is gone.
	RepairEndOrphan RepairKind = "end_orphan"
)

// Repair is one decided repair.
type Repair struct {
	Kind     RepairKind `json:"kind"`
	NodeUUID string     `json:"node_uuid"`
	// From is the state the node must still be in (the write is
	// conditional on it); To the state recorded.
	From provision.State `json:"from,omitempty"`
	To   provision.State `json:"to,omitempty"`
	// LastError is recorded with To (RepairFail).
	LastError string `json:"last_error,omitempty"`
	// Event is the node history event (and the orphan's termination
	// reason).
	Event string `json:"event"`
	// Request restarts the verb (RepairRestart).
	Request *provision.Request `json:"request,omitempty"`
	// RunID is the orphan run to end (RepairEndOrphan).
	RunID string `json:"run_id,omitempty"`
}

// RepairBatch is one pass's repairs for the apply activity.
type RepairBatch struct {
	ConductorGroup string   `json:"conductor_group"`
	Repairs        []Repair `json:"repairs"`
}

// RepairOutcome says what became of one repair: Applied, or Skipped with
// the reason (the node moved on, a workflow took it).
type RepairOutcome struct {
	Kind     RepairKind      `json:"kind"`
	NodeUUID string          `json:"node_uuid"`
	From     provision.State `json:"from,omitempty"`
	To       provision.State `json:"to,omitempty"`
	Applied  bool            `json:"applied"`
	Skipped  string          `json:"skipped,omitempty"`
}

// ReconcileStatus answers QueryReconcileStatus: the run's passes and what
// each changed.
type ReconcileStatus struct {
	ConductorGroup string    `json:"conductor_group"`
	Passes         int       `json:"passes"` // in this run
	LastPass       time.Time `json:"last_pass"`
	Nodes          int       `json:"nodes"`
	Held           int       `json:"held"`
	Deferred       int       `json:"deferred"`
	// Changes lists every repair applied in this run, oldest first (at
	// most maxStatusChanges).
	Changes   []RepairOutcome `json:"changes,omitempty"`
	LastError string          `json:"last_error,omitempty"`
}

const maxStatusChanges = 1000

// restartable are the verbs whose request is whole in the node's row: the
// API writes nothing after the state and passes no argument besides the
// verb, so a start the API lost can be made again as the API would have.
// A deploy's config drive and deploy steps, a manual clean's or a
// service's steps, a rescue's password are the request's alone: those
// nodes fail instead, and their users ask again.
var restartable = map[provision.Verb]bool{
	provision.VerbManage: true, provision.VerbProvide: true, provision.VerbInspect: true,
	provision.VerbDeleted: true, provision.VerbUndeploy: true, provision.VerbUnrescue: true,
	provision.VerbAdopt: true,
}

// DecideRepairs is the reconciler's judgement over one pass's facts, in
// order:
//
//  1. a node whose latest workflow closed after the node entered its
//     state, having recorded a settled or failed state other than the
//     node's, takes that state (a database restored from a backup older
//     than the workflow), unless the node's state is a verb the API
//     accepted after that workflow started;
//  2. a node in a transient state, no workflow running, its state older
//     than grace:
//     - its last history event is the API's acceptance of a verb into this
//     state, and no run started since: the API stopped between its write
//     and the start. A verb whose request is whole in the row starts
//     again; any other fails with a last_error naming what was lost;
//     - otherwise (a workflow ended with the node in this state, or none is
//     known) it fails, as Ironic's conductor takeover fails every -ing
//     state, with a last_error saying why;
//  3. a running workflow whose node is gone is terminated.
//
// Anything else is left as it is.
func DecideRepairs(now time.Time, grace time.Duration, group string, f ReconcileFacts) []Repair {
	var out []Repair
	for _, n := range f.Candidates {
		if r, ok := decideNode(now, grace, group, n); ok {
			out = append(out, r)
		}
	}
	for _, o := range f.Orphans {
		if now.Sub(o.Started) < grace {
			continue
		}
		out = append(out, Repair{Kind: RepairEndOrphan, NodeUUID: o.NodeUUID, RunID: o.RunID,
			Event: fmt.Sprintf("Reconciler: node %s no longer exists; its workflow %s (%s, run %s) ends", o.NodeUUID, WorkflowID(o.NodeUUID), o.WorkflowType, o.RunID)})
	}
	return out
}

func decideNode(now time.Time, grace time.Duration, group string, n NodeFacts) (Repair, bool) {
	last := n.Last
	if last != nil && last.Running {
		return Repair{}, false // the workflow holds the node
	}
	// A verb the API accepted after this run started is not this run's:
	// from a settled state the API records the verb while the run that
	// recorded the state may still be closing, and starts its own
	// workflow after. Such a node is judged by step 2, never undone here.
	acceptedSince := n.Accepted != nil && n.Accepted.Next == n.State && (last == nil || !last.Started.After(n.AcceptedAt))
	// 1. The finished workflow's last state against the row, once both
	// are older than grace (visibility lags a start by a moment).
	if last != nil && !last.Closed.IsZero() && last.Closed.After(n.StateSince) && last.State != "" &&
		last.State != n.State && (last.State.Settled() || last.State.Failed()) && !acceptedSince &&
		now.Sub(last.Closed) >= grace && now.Sub(n.StateSince) >= grace {
		r := Repair{Kind: RepairCorrect, NodeUUID: n.NodeUUID, From: n.State, To: last.State,
			Event: fmt.Sprintf("Reconciler: provision state corrected from \"%s\" to \"%s\", the state workflow %s (%s, run %s) recorded last before it closed at %s",
				n.State, last.State, WorkflowID(n.NodeUUID), last.WorkflowType, last.RunID, last.Closed.UTC().Format(time.RFC3339))}
		if last.State.Failed() {
			r.LastError = fmt.Sprintf("%s; the node's record of the failure was lost (its database was older than the workflow)", r.Event)
		}
		return r, true
	}
	// 2. A transient state that no workflow holds.
	fail, transient := provision.FailureOf(n.State)
	if !transient || now.Sub(n.StateSince) < grace {
		return Repair{}, false
	}
	failWith := func(why string) (Repair, bool) {
		msg := fmt.Sprintf("Reconciler: %s; the node moves from \"%s\" to \"%s\"", why, n.State, fail)
		return Repair{Kind: RepairFail, NodeUUID: n.NodeUUID, From: n.State, To: fail, LastError: msg, Event: msg}, true
	}
	if a := n.Accepted; acceptedSince {
		at := n.AcceptedAt.UTC().Format(time.RFC3339)
		t, ok := provision.Retake(*a)
		if ok && restartable[a.Verb] {
			if _, known := WorkflowFor(t.Operation); known {
				req := &provision.Request{NodeUUID: n.NodeUUID, Verb: a.Verb, FromState: a.From, Transition: t,
					ConductorGroup: group, RequestedAt: now}
				return Repair{Kind: RepairRestart, NodeUUID: n.NodeUUID, From: n.State, To: n.State, Request: req,
					Event: fmt.Sprintf("Reconciler: provision action \"%s\" accepted at %s never started its workflow (the API stopped before it); started again", a.Verb, at)}, true
			}
		}
		return failWith(fmt.Sprintf("provision action \"%s\" accepted at %s never started its workflow (the API stopped before it), and what its request carried besides the verb (%s) was not kept, so it is not started again: ask again",
			a.Verb, at, lostWith(a.Verb)))
	}
	if last != nil && !last.Closed.IsZero() {
		return failWith(fmt.Sprintf("no workflow holds the node: its last workflow %s (%s, run %s) ended %s at %s",
			WorkflowID(n.NodeUUID), last.WorkflowType, last.RunID, last.Status, last.Closed.UTC().Format(time.RFC3339)))
	}
	return failWith("no workflow of the node is running or known (none closed in the reconciler's lookback window)")
}

// lostWith names what a verb's request carries that the node's row does
// not.
func lostWith(v provision.Verb) string {
	switch v {
	case provision.VerbActive, provision.VerbDeploy, provision.VerbRebuild:
		return "config drive, deploy steps"
	case provision.VerbClean:
		return "clean steps or runbook, disable_ramdisk"
	case provision.VerbService:
		return "service steps or runbook, disable_ramdisk"
	case provision.VerbRescue:
		return "rescue password"
	}
	return "arguments"
}

// Reconcile keeps a conductor group's nodes and their workflows in
// agreement, forever: step 1, one pass at once (at start-up); step 2, wait
// Interval on a durable timer and pass again; after IterationsPerRun passes,
// continue as new. A failed pass is logged and the next is its retry: the
// reconciler never ends on an error.
func Reconcile(ctx workflow.Context, in ReconcileInput) error {
	in = in.withDefaults()
	log := workflow.GetLogger(ctx)
	status := ReconcileStatus{ConductorGroup: in.ConductorGroup}
	if err := workflow.SetQueryHandler(ctx, QueryReconcileStatus, func() (ReconcileStatus, error) { return status, nil }); err != nil {
		return err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(in.ConductorGroup),
		StartToCloseTimeout: in.PassTimeout,
		// One attempt: the next pass is the retry, and reads its facts
		// anew.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	now := workflow.GetSignalChannel(ctx, SignalReconcileNow)
	for i := 0; i < in.IterationsPerRun; i++ {
		// A run whose passes repaired much has a long history: the next
		// run starts afresh.
		if i > 0 && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
		if i > 0 || in.Continued {
			if err := waitPass(ctx, now, in.Interval); err != nil {
				return err
			}
		}
		drain(now) // this pass answers the signals sent before it
		status.Passes++
		status.LastPass = workflow.Now(ctx)
		var facts ReconcileFacts
		err := workflow.ExecuteActivity(actx, ActReconcileFacts, ReconcileScan{
			ConductorGroup: in.ConductorGroup, Grace: in.Grace, Lookback: in.Lookback, MaxCandidates: in.MaxCandidates,
		}).Get(ctx, &facts)
		if err != nil {
			status.LastError = errorText(err)
			log.Warn("reconcile: reading the facts failed; the next pass retries", "conductor_group", in.ConductorGroup, "error", status.LastError)
			continue
		}
		status.Nodes, status.Held, status.Deferred, status.LastError = facts.Nodes, facts.Held, facts.Deferred, ""
		repairs := DecideRepairs(facts.At, in.Grace, in.ConductorGroup, facts)
		if len(repairs) == 0 {
			continue
		}
		var outcomes []RepairOutcome
		err = workflow.ExecuteActivity(actx, ActReconcileRepair, RepairBatch{ConductorGroup: in.ConductorGroup, Repairs: repairs}).Get(ctx, &outcomes)
		if err != nil {
			status.LastError = errorText(err)
			log.Warn("reconcile: repairs failed; the next pass retries", "conductor_group", in.ConductorGroup, "error", status.LastError)
			continue
		}
		for _, o := range outcomes {
			if o.Applied {
				status.Changes = append(status.Changes, o)
			}
		}
		if len(status.Changes) > maxStatusChanges {
			status.Changes = status.Changes[len(status.Changes)-maxStatusChanges:]
		}
		log.Info("reconcile: pass repaired nodes", "conductor_group", in.ConductorGroup, "repairs", len(repairs), "outcomes", outcomes)
	}
	// A start-up's signal that arrived since the last pass is the next
	// run's: it passes at once.
	in.Continued = !drain(now)
	return workflow.NewContinueAsNewError(ctx, WorkflowReconcile, in)
}

// waitPass waits for the interval's durable timer or a SignalReconcileNow,
// whichever comes first; signals that arrived together count as one.
func waitPass(ctx workflow.Context, now workflow.ReceiveChannel, interval time.Duration) error {
	if drain(now) {
		return nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	var err error
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, interval), func(f workflow.Future) { err = f.Get(ctx, nil) })
	sel.AddReceive(now, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	drain(now)
	return err
}

// drain takes every signal waiting on c and reports whether there was one.
func drain(c workflow.ReceiveChannel) bool {
	got := false
	for c.ReceiveAsync(nil) {
		got = true
	}
	return got
}
