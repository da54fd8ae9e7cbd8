package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// A rollout (docs/rollouts.md) is one node operation carried out over a set
// of nodes in waves: a canary wave, then waves of a fixed size, a failure
// budget that stops it, a soak time between waves, an optional approval
// before each wave after the first, and pause, resume, approve and abort
// signals. The Rollout workflow never writes a node itself: each node's
// operation is started by an activity that sends the API's own provision
// request (apiserver's NodeOperator), so the node lock, the one-verb-wins
// rule and every refusal hold as for a person, and each node's workflow is
// the node's own (ID node-<uuid>), not a child of the rollout.

// WorkflowRollout is Rollout's name.
const WorkflowRollout = "Rollout"

// RolloutWorkflowID is the ID of a rollout's workflow.
func RolloutWorkflowID(rolloutUUID string) string { return "rollout-" + rolloutUUID }

// SearchAttrRollout names the rollout a workflow belongs to: the rollout's
// own workflow carries it (Temporal Web UI: RolloutUUID = "<uuid>").
const SearchAttrRollout = "RolloutUUID"

// SearchAttrRolloutProject names the Keystone project a rollout belongs
// to, when a project (not the system) created it: its rollouts are listed
// and read by it alone (docs/rollouts.md, "The API").
const SearchAttrRolloutProject = "RolloutProject"

var (
	saRollout        = temporal.NewSearchAttributeKeyKeyword(SearchAttrRollout)
	saRolloutProject = temporal.NewSearchAttributeKeyKeyword(SearchAttrRolloutProject)
)

// RolloutSearchAttributes are the attributes a rollout's workflow starts
// with: its UUID, and its project when a project created it.
func RolloutSearchAttributes(rolloutUUID, project string) temporal.SearchAttributes {
	if project == "" {
		return temporal.NewSearchAttributes(saRollout.ValueSet(rolloutUUID))
	}
	return temporal.NewSearchAttributes(saRollout.ValueSet(rolloutUUID), saRolloutProject.ValueSet(project))
}

// NodeRolloutSearchAttributes are those a node's workflow starts with when
// a rollout sent its verb: the node's, and the rollout's. They are set at
// the start, not upserted: the workflow records no command for them.
func NodeRolloutSearchAttributes(nodeUUID string, operation provision.Operation, provisionState provision.State, rolloutUUID string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		saNodeUUID.ValueSet(nodeUUID),
		saOperation.ValueSet(string(operation)),
		saProvisionState.ValueSet(string(provisionState)),
		saRollout.ValueSet(rolloutUUID),
	)
}

// Signals a rollout obeys, and its status query.
const (
	SignalRolloutPause   = "pause"
	SignalRolloutResume  = "resume"
	SignalRolloutApprove = "approve"
	SignalRolloutAbort   = "abort"
	QueryRolloutStatus   = "status"
)

// Activities of a rollout (run on the workflow queue's worker as local
// activities would not do: they wait, so they are regular activities on
// the default hardware queue).
const (
	ActRolloutResolve   = "RolloutResolve"
	ActRolloutStartNode = "RolloutStartNode"
	ActRolloutAwait     = "RolloutAwaitNodes"
	// ActRolloutForget drops what the rollout kept outside its history
	// (its config drive template) when it ends.
	ActRolloutForget = "RolloutForget"
)

// Busy policies: what a rollout does with a node another operation holds
// or that is in maintenance.
const (
	RolloutOnBusySkip = "skip"
	RolloutOnBusyWait = "wait"
)

// RolloutSpec is what a rollout does, where and how; the API checks it
// (apiserver/rollouts.go) before the workflow starts.
type RolloutSpec struct {
	UUID string `json:"uuid"`
	// Operation is the body of PUT /v1/nodes/{node}/states/provision each
	// node gets (target, clean_steps, service_steps, deploy_steps, runbook,
	// disable_ramdisk), never a config drive, which may hold secrets (a
	// template is kept apart: ConfigDriveTemplate). Or a power action: {"power": the body of PUT
	// /v1/nodes/{node}/states/power}.
	Operation map[string]any `json:"operation"`
	// ConfigDriveTemplate: the deploy's config drive is a template kept in
	// PostgreSQL (not in this history: it may hold secrets), rendered for
	// each node when its operation starts (docs/rollouts.md, "Config
	// drives"); the rollout forgets it when it ends.
	ConfigDriveTemplate bool            `json:"configdrive_template,omitempty"`
	Selector            RolloutSelector `json:"selector"`
	// Canary is the size of the first wave (0: none); WaveSize the size of
	// every other; Parallelism the most node operations running at once
	// within a wave (0: the whole wave).
	Canary      int `json:"canary"`
	WaveSize    int `json:"wave_size"`
	Parallelism int `json:"parallelism"`
	// MaxFailures stops the rollout at its (MaxFailures+1)th failure
	// (-1: no count budget); MaxFailurePercent at the failure that makes
	// more than that percent of its nodes failed (0: none).
	MaxFailures       int `json:"max_failures"`
	MaxFailurePercent int `json:"max_failure_percent"`
	// WaveMaxFailures and WaveMaxFailurePercent are the same budgets for
	// each wave on its own (counting the failures of that wave's nodes
	// against its size): 0 for none. The rollout stops at the failure
	// that spends either.
	WaveMaxFailures       int `json:"wave_max_failures,omitempty"`
	WaveMaxFailurePercent int `json:"wave_max_failure_percent,omitempty"`
	// SoakSeconds is the wait between waves.
	SoakSeconds int `json:"soak_seconds"`
	// Approval: every wave after the first waits for an approve signal.
	Approval bool `json:"approval"`
	// Rolling: the waves after the canary roll into each other: a wave's
	// nodes start as the one before frees its slots, at most a wave's
	// size (or Parallelism) running at once, instead of after the whole
	// wave ended. Not with a soak time or an approval, which stand
	// between waves; the canary wave always ends first.
	Rolling bool `json:"rolling,omitempty"`
	// OnBusy is RolloutOnBusySkip or RolloutOnBusyWait.
	OnBusy string `json:"on_busy"`
	// ContinueAsNewAfter is how many node operations one run of the
	// workflow starts before it continues as new.
	ContinueAsNewAfter int `json:"continue_as_new_after"`
	// PollSeconds is how often a node's end is looked for (default 1).
	PollSeconds float64 `json:"poll_seconds,omitempty"`
	// CreatedBy is the user who created the rollout; each node's history
	// names the rollout.
	CreatedBy string `json:"created_by,omitempty"`
	// Project is the Keystone project that created the rollout, when it
	// was not the system: the rollout's nodes are ones the project owns
	// or leases (checked when it was created), and the rollout is the
	// project's to read, pause, resume, approve and abort.
	Project string `json:"project,omitempty"`
	// Requested is the selector as the user wrote it; Selector is what the
	// API resolved it to when it created the rollout (Selector.Nodes), and
	// Refused the nodes it left out because their state does not allow
	// the operation (on_refused: skip).
	Requested RolloutSelector `json:"requested_selector"`
	Refused   []RolloutNode   `json:"refused,omitempty"`
}

// RolloutView is what the status query answers: the spec and the status.
type RolloutView struct {
	Spec RolloutSpec `json:"spec"`
	RolloutStatus
}

// RolloutSelector chooses the nodes, resolved once when the rollout starts.
type RolloutSelector struct {
	Nodes          []string `json:"nodes,omitempty"`
	ResourceClass  string   `json:"resource_class,omitempty"`
	ConductorGroup *string  `json:"conductor_group,omitempty"`
	Owner          string   `json:"owner,omitempty"`
	Shard          string   `json:"shard,omitempty"`
	ProvisionState string   `json:"provision_state,omitempty"`
	Traits         []string `json:"traits,omitempty"`
}

// Node states in a rollout.
const (
	RolloutNodePending   = "pending"
	RolloutNodeRunning   = "running"
	RolloutNodeSucceeded = "succeeded"
	RolloutNodeFailed    = "failed"
	RolloutNodeSkipped   = "skipped"
)

// Rollout states.
const (
	RolloutRunning         = "running"
	RolloutPaused          = "paused"
	RolloutSoaking         = "soaking"
	RolloutAwaitingApprove = "awaiting_approval"
	RolloutSucceeded       = "succeeded"
	RolloutBudgetSpent     = "failed"
	RolloutAborted         = "aborted"
)

// RolloutNode is one node's place and outcome in a rollout.
type RolloutNode struct {
	UUID           string `json:"uuid"`
	Wave           int    `json:"wave"`
	State          string `json:"state"`
	ProvisionState string `json:"provision_state,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	// Expect is the state the operation ends in when it succeeds.
	Expect    string    `json:"expect,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// RolloutStatus is what GET shows, and what a continued run carries.
type RolloutStatus struct {
	State     string        `json:"state"`
	Reason    string        `json:"reason,omitempty"`
	Wave      int           `json:"current_wave"`
	Waves     [][]int       `json:"waves"` // indexes into Nodes, per wave
	Nodes     []RolloutNode `json:"nodes"`
	Succeeded int           `json:"succeeded"`
	Failed    int           `json:"failed"`
	Skipped   int           `json:"skipped"`
	// Approved counts approve signals taken; Runs the workflow's runs.
	Approved  int       `json:"approvals"`
	Runs      int       `json:"runs"`
	StartedAt time.Time `json:"started_at,omitzero"`
	// WaveStarted: the current wave's soak and approval are behind it.
	WaveStarted bool `json:"wave_started,omitempty"`
}

// RolloutInput is Rollout's argument: the spec, and the status of the run
// before when the workflow continued as new.
type RolloutInput struct {
	Spec   RolloutSpec    `json:"spec"`
	Status *RolloutStatus `json:"status,omitempty"`
	// Carried signal state across continue-as-new.
	Paused bool `json:"paused,omitempty"`
}

// RolloutStartResult is what starting one node's operation came to.
type RolloutStartResult struct {
	// Started: the API accepted the request (202).
	Started bool `json:"started"`
	// Busy: the node is held by another operation or in maintenance.
	Busy bool `json:"busy,omitempty"`
	// Expect is the state a success ends in.
	Expect string `json:"expect,omitempty"`
	// Error is the API's refusal (its error message) when not started.
	Error string `json:"error,omitempty"`
}

// RolloutStartInput names the node and the rollout.
type RolloutStartInput struct {
	Rollout   string         `json:"rollout"`
	Node      string         `json:"node"`
	Operation map[string]any `json:"operation"`
	User      string         `json:"user,omitempty"`
	// ConfigDriveTemplate: render the rollout's kept template for the
	// node and send it as the operation's configdrive.
	ConfigDriveTemplate bool `json:"configdrive_template,omitempty"`
}

// RolloutAwaitInput lists the nodes whose operations run.
type RolloutAwaitInput struct {
	Nodes       []RolloutAwaitNode `json:"nodes"`
	PollSeconds float64            `json:"poll_seconds"`
}

// RolloutAwaitNode is one running node and the state its success ends in.
type RolloutAwaitNode struct {
	UUID   string `json:"uuid"`
	Expect string `json:"expect"`
}

// RolloutNodeEnd is a node whose operation ended.
type RolloutNodeEnd struct {
	UUID           string `json:"uuid"`
	OK             bool   `json:"ok"`
	ProvisionState string `json:"provision_state"`
	LastError      string `json:"last_error,omitempty"`
}

// RolloutResolveInput is the selector to resolve, and the operation's
// target so that the resolution can say which nodes it does not allow.
type RolloutResolveInput struct {
	Selector RolloutSelector `json:"selector"`
}

// PlanWaves cuts nodes into waves: a canary wave of canary nodes (if any),
// then waves of size waveSize.
func PlanWaves(n, canary, waveSize int) [][]int {
	var waves [][]int
	i := 0
	if canary > 0 {
		end := min(canary, n)
		waves = append(waves, seq(0, end))
		i = end
	}
	if waveSize <= 0 {
		waveSize = n
	}
	for i < n {
		end := min(i+waveSize, n)
		waves = append(waves, seq(i, end))
		i = end
	}
	return waves
}

func seq(a, b int) []int {
	out := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

// budgetSpent reports whether failed failures out of total nodes exceed
// the spec's budget.
func (s RolloutSpec) budgetSpent(failed, total int) bool {
	if s.MaxFailures >= 0 && failed > s.MaxFailures {
		return true
	}
	if s.MaxFailurePercent > 0 && total > 0 && failed*100 > s.MaxFailurePercent*total {
		return true
	}
	return false
}

// waveBudgetSpent names the first wave whose failures exceed the spec's
// per-wave budget, -1 when none does.
func (s RolloutSpec) waveBudgetSpent(st *RolloutStatus) int {
	if s.WaveMaxFailures <= 0 && s.WaveMaxFailurePercent <= 0 {
		return -1
	}
	for w, idx := range st.Waves {
		failed := 0
		for _, i := range idx {
			if st.Nodes[i].State == RolloutNodeFailed {
				failed++
			}
		}
		if s.WaveMaxFailures > 0 && failed > s.WaveMaxFailures ||
			s.WaveMaxFailurePercent > 0 && failed*100 > s.WaveMaxFailurePercent*len(idx) {
			return w
		}
	}
	return -1
}

// Rollout runs a rollout (docs/rollouts.md). How it waits for a node: the
// node's workflow is not its child (the API starts it under the node's own
// ID, as for a person), so an activity polls the nodes' rows and locks
// (apiserver's NodeOperator.Await) and returns as soon as one of the
// running nodes has ended; the workflow then starts the next.
func Rollout(ctx workflow.Context, in RolloutInput) (*RolloutStatus, error) {
	spec := in.Spec
	st := in.Status
	paused, aborted := in.Paused, false
	approvals := 0
	if st != nil {
		approvals = st.Approved
	}
	logger := workflow.GetLogger(ctx)

	// Signals: pause and resume toggle; approve counts; abort is final.
	pauseCh := workflow.GetSignalChannel(ctx, SignalRolloutPause)
	resumeCh := workflow.GetSignalChannel(ctx, SignalRolloutResume)
	approveCh := workflow.GetSignalChannel(ctx, SignalRolloutApprove)
	abortCh := workflow.GetSignalChannel(ctx, SignalRolloutAbort)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(pauseCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); paused = true })
			sel.AddReceive(resumeCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); paused = false })
			sel.AddReceive(approveCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); approvals++ })
			sel.AddReceive(abortCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); aborted = true })
			sel.Select(ctx)
		}
	})

	// Await heartbeats at every poll (at most 5 s apart): a worker that
	// dies under it is noticed within HeartbeatTimeout. A start waits at
	// most for the API's lock retries and a failed workflow's abort
	// (apiserver's abortWaitTimeout, 15 s).
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(""),
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	sctx := workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(""),
		StartToCloseTimeout: 45 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})

	if err := workflow.SetQueryHandler(ctx, QueryRolloutStatus, func() (RolloutView, error) {
		if st == nil {
			return RolloutView{Spec: spec, RolloutStatus: RolloutStatus{State: "resolving"}}, nil
		}
		out := RolloutView{Spec: spec, RolloutStatus: *st}
		out.Approved = approvals
		switch {
		case out.State != RolloutRunning:
		case aborted:
			out.State = RolloutAborted
		case paused:
			out.State = RolloutPaused
		}
		return out, nil
	}); err != nil {
		return nil, err
	}

	// The selector is resolved once, in the first run: its answer is in
	// the history, and every later run carries it.
	if st == nil {
		var nodes []string
		if err := workflow.ExecuteActivity(actx, ActRolloutResolve, RolloutResolveInput{Selector: spec.Selector}).Get(ctx, &nodes); err != nil {
			return nil, fmt.Errorf("resolve the rollout's selector: %w", err)
		}
		st = &RolloutStatus{State: RolloutRunning, StartedAt: workflow.Now(ctx)}
		for _, u := range nodes {
			st.Nodes = append(st.Nodes, RolloutNode{UUID: u, State: RolloutNodePending})
		}
		rolloutCount(ctx, metricRolloutsStarted, "")
		st.Waves = PlanWaves(len(nodes), spec.Canary, spec.WaveSize)
		for w, idx := range st.Waves {
			for _, i := range idx {
				st.Nodes[i].Wave = w
			}
		}
	}
	st.Runs++
	poll := spec.PollSeconds
	if poll <= 0 {
		poll = 1
	}
	startedThisRun := 0
	running := map[int]bool{}

	finish := func(state, reason string) (*RolloutStatus, error) {
		if spec.ConfigDriveTemplate {
			// The template may hold secrets: it goes with the rollout.
			if err := workflow.ExecuteActivity(sctx, ActRolloutForget, spec.UUID).Get(ctx, nil); err != nil {
				logger.Warn("rollout: forgetting the config drive template failed", "err", err)
			}
		}
		rolloutCount(ctx, metricRolloutsFinished, state)
		st.State, st.Reason = state, reason
		st.Approved = approvals
		return st, nil
	}
	// await waits for at least one running node to end and records it.
	await := func() error {
		var in RolloutAwaitInput
		in.PollSeconds = poll
		for i := range st.Nodes {
			if running[i] {
				in.Nodes = append(in.Nodes, RolloutAwaitNode{UUID: st.Nodes[i].UUID, Expect: st.Nodes[i].Expect})
			}
		}
		var ends []RolloutNodeEnd
		if err := workflow.ExecuteActivity(actx, ActRolloutAwait, in).Get(ctx, &ends); err != nil {
			return err
		}
		for _, e := range ends {
			for i := range st.Nodes {
				if st.Nodes[i].UUID != e.UUID || !running[i] {
					continue
				}
				delete(running, i)
				n := &st.Nodes[i]
				n.ProvisionState, n.LastError, n.EndedAt = e.ProvisionState, e.LastError, workflow.Now(ctx)
				if e.OK {
					n.State = RolloutNodeSucceeded
					st.Succeeded++
				} else {
					n.State = RolloutNodeFailed
					st.Failed++
				}
				rolloutCount(ctx, metricRolloutNodes, n.State)
			}
		}
		return nil
	}
	drain := func() error {
		for len(running) > 0 {
			if err := await(); err != nil {
				return err
			}
		}
		return nil
	}

	for ; st.Wave < len(st.Waves); st.Wave, st.WaveStarted = st.Wave+1, false {
		if !st.WaveStarted && st.Wave > 0 {
			if spec.SoakSeconds > 0 {
				st.State = RolloutSoaking
				_, _ = workflow.AwaitWithTimeout(ctx, time.Duration(spec.SoakSeconds)*time.Second, func() bool { return aborted })
				st.State = RolloutRunning
			}
			if spec.Approval {
				st.State = RolloutAwaitingApprove
				if err := workflow.Await(ctx, func() bool { return aborted || approvals > st.Approved }); err != nil {
					return nil, err
				}
				st.State = RolloutRunning
				if !aborted {
					st.Approved++
				}
			}
		}
		st.WaveStarted = true
		if aborted {
			return finish(RolloutAborted, "aborted by an operator: no node operation was started after it")
		}
		pending := []int{}
		for _, i := range st.Waves[st.Wave] {
			if st.Nodes[i].State == RolloutNodePending {
				pending = append(pending, i)
			}
		}
		par := spec.Parallelism
		if par <= 0 {
			par = len(st.Waves[st.Wave])
			if spec.Rolling && spec.WaveSize > 0 {
				par = spec.WaveSize
			}
		}
		// rollsOn: with rolling waves, the next wave's nodes start as the
		// current one's slots free up (never out of the canary wave).
		rollsOn := func() bool {
			return spec.Rolling && st.Wave+1 < len(st.Waves) && (spec.Canary == 0 || st.Wave > 0)
		}
		for len(pending) > 0 || len(running) > 0 {
			if aborted {
				if err := drain(); err != nil {
					return nil, err
				}
				return finish(RolloutAborted, "aborted by an operator: no node operation was started after it")
			}
			if spec.budgetSpent(st.Failed, len(st.Nodes)) {
				if err := drain(); err != nil {
					return nil, err
				}
				return finish(RolloutBudgetSpent, fmt.Sprintf("failure budget spent in wave %d: %d nodes failed", st.Wave, st.Failed))
			}
			if w := spec.waveBudgetSpent(st); w >= 0 {
				if err := drain(); err != nil {
					return nil, err
				}
				return finish(RolloutBudgetSpent, fmt.Sprintf("the failure budget of wave %d is spent: %d of its %d nodes failed (%d nodes failed in all)",
					w, waveFailed(st, w), len(st.Waves[w]), st.Failed))
			}
			if paused {
				// Running operations end on their own; nothing new starts.
				if len(running) > 0 {
					if err := await(); err != nil {
						return nil, err
					}
					continue
				}
				if err := workflow.Await(ctx, func() bool { return !paused || aborted }); err != nil {
					return nil, err
				}
				continue
			}
			for len(pending) == 0 && rollsOn() && !paused && !aborted {
				st.Wave++
				for _, i := range st.Waves[st.Wave] {
					if st.Nodes[i].State == RolloutNodePending {
						pending = append(pending, i)
					}
				}
			}
			if len(running) == 0 && startedThisRun >= spec.ContinueAsNewAfter && spec.ContinueAsNewAfter > 0 {
				st.Approved = approvals
				return nil, workflow.NewContinueAsNewError(ctx, Rollout, RolloutInput{Spec: spec, Status: st, Paused: paused})
			}
			var busy []int
			// The starts of what may run now go out together and are read
			// in order: a wave of a hundred nodes starts in about one
			// start's time, not a hundred.
			type start struct {
				i int
				f workflow.Future
			}
			var batch []start
			for len(pending) > 0 && len(running)+len(batch) < par && !paused && !aborted &&
				(spec.ContinueAsNewAfter <= 0 || startedThisRun+len(batch) < spec.ContinueAsNewAfter) {
				i := pending[0]
				pending = pending[1:]
				batch = append(batch, start{i, workflow.ExecuteActivity(sctx, ActRolloutStartNode, RolloutStartInput{
					Rollout: spec.UUID, Node: st.Nodes[i].UUID, Operation: spec.Operation, User: spec.CreatedBy,
					ConfigDriveTemplate: spec.ConfigDriveTemplate,
				})})
			}
			for _, b := range batch {
				i, n := b.i, &st.Nodes[b.i]
				var res RolloutStartResult
				if err := b.f.Get(ctx, &res); err != nil {
					return nil, fmt.Errorf("start the operation of node %s: %w", n.UUID, err)
				}
				switch {
				case res.Started:
					n.State, n.Expect, n.StartedAt = RolloutNodeRunning, res.Expect, workflow.Now(ctx)
					running[i] = true
					startedThisRun++
				case res.Busy && spec.OnBusy == RolloutOnBusyWait:
					busy = append(busy, i)
				default:
					n.State, n.LastError = RolloutNodeSkipped, res.Error
					st.Skipped++
					rolloutCount(ctx, metricRolloutNodes, n.State)
					logger.Info("rollout skipped a node", "node", n.UUID, "reason", res.Error)
				}
			}
			if len(busy) > 0 {
				pending = append(pending, busy...)
			}
			if len(running) > 0 {
				if err := await(); err != nil {
					return nil, err
				}
			} else if len(busy) > 0 {
				// Every node left waits for another operation: look again.
				_ = workflow.Sleep(ctx, time.Duration(poll*float64(time.Second)))
			}
		}
		if spec.budgetSpent(st.Failed, len(st.Nodes)) {
			return finish(RolloutBudgetSpent, fmt.Sprintf("failure budget spent in wave %d: %d nodes failed", st.Wave, st.Failed))
		}
		if w := spec.waveBudgetSpent(st); w >= 0 {
			return finish(RolloutBudgetSpent, fmt.Sprintf("the failure budget of wave %d is spent: %d of its %d nodes failed (%d nodes failed in all)",
				w, waveFailed(st, w), len(st.Waves[w]), st.Failed))
		}
	}
	return finish(RolloutSucceeded, "")
}

// waveFailed counts the failed nodes of wave w.
func waveFailed(st *RolloutStatus, w int) int {
	n := 0
	for _, i := range st.Waves[w] {
		if st.Nodes[i].State == RolloutNodeFailed {
			n++
		}
	}
	return n
}

// RolloutPowerAction is the power action a rollout's operation carries
// ({"power": <body of PUT /v1/nodes/{node}/states/power>}), if it is one.
func RolloutPowerAction(op map[string]any) (map[string]any, bool) {
	p, ok := op["power"].(map[string]any)
	return p, ok
}

// RolloutPowerExpect marks the Expect of a node whose operation is a power
// action: "power:" and the power state it ends in.
const RolloutPowerExpect = "power:"

// RolloutOperationJSON is a rollout's operation as JSON, for messages.
func RolloutOperationJSON(op map[string]any) string {
	b, _ := json.Marshal(op)
	return string(b)
}
