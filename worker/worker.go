package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Options size a worker. Zero values take the SDK's defaults.
type Options struct {
	// ConductorGroups this worker serves hardware activities for; the empty
	// group is "default". A worker always runs workflows.
	ConductorGroups []string
	// MaxConcurrentActivities per task queue; hardware calls mostly wait.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks and MaxConcurrentLocalActivities bound the
	// workflow side.
	MaxConcurrentWorkflowTasks   int
	MaxConcurrentLocalActivities int
	// WorkflowTaskPollers and ActivityTaskPollers are the long polls each
	// worker keeps open on its queue: with few, a burst of starts waits for
	// a poll to come back before its first workflow task runs.
	WorkflowTaskPollers int
	ActivityTaskPollers int
	// SignalKeys verify the heartbeat signals the API signs (package
	// signature); required.
	SignalKeys signature.Keys
	// ConsoleHolder is this process's conductor hostname: with it, the
	// worker also polls its own console queue in each conductor group
	// (workflows.ConsoleQueue), where disabling a console it holds reaches
	// it (docs/console.md). Empty: no console queue.
	ConsoleHolder string
	// Rollouts runs the Rollout workflow's activities: the process's
	// apiserver.NodeOperator (docs/rollouts.md). Without it, a rollout's
	// activities wait for a worker that has one.
	Rollouts RolloutOperator
}

// RolloutOperator carries out a rollout's node operations through the
// API's provision path (apiserver.NodeOperator).
type RolloutOperator interface {
	Resolve(ctx context.Context, in workflows.RolloutResolveInput) ([]string, error)
	StartNode(ctx context.Context, in workflows.RolloutStartInput) (workflows.RolloutStartResult, error)
	Await(ctx context.Context, in workflows.RolloutAwaitInput) ([]workflows.RolloutNodeEnd, error)
	Forget(ctx context.Context, rolloutUUID string) error
}

// Named defaults (README: configuration).
const (
	DefaultMaxConcurrentActivities      = 200
	DefaultMaxConcurrentWorkflowTasks   = 50
	DefaultMaxConcurrentLocalActivities = 200
	// DefaultWorkflowTaskPollers: 8 rather than the SDK's 2 took 200 fake
	// deploys from 23.9 to 32.9 and from 33.0 to 61.2 nodes/s in two
	// before/after runs of make bench's control part (README, "Benchmarks").
	DefaultWorkflowTaskPollers = 8
	// DefaultActivityTaskPollers: 8 rather than 2 took 100 deploys through
	// simulated agents from 9.0 to 12.2 nodes/s and a deploy's activities'
	// time in the queue from 3.4 s to 0.5 s (make bench's agent part, back
	// to back, -worker-args=--activity-task-pollers=8).
	DefaultActivityTaskPollers = 8
)

// Workflows lists every workflow with the name clients start it by.
func Workflows() map[string]any {
	return map[string]any{
		workflows.WorkflowManageNode:       workflows.ManageNode,
		workflows.WorkflowProvideNode:      workflows.ProvideNode,
		workflows.WorkflowDeployNode:       workflows.DeployNode,
		workflows.WorkflowUndeployNode:     workflows.UndeployNode,
		workflows.WorkflowSetPowerState:    workflows.SetPowerState,
		workflows.WorkflowChangeBootDevice: workflows.ChangeBootDevice,
		workflows.WorkflowInspectNode:      workflows.InspectNode,
		workflows.WorkflowRescueNode:       workflows.RescueNode,
		workflows.WorkflowUnrescueNode:     workflows.UnrescueNode,
		workflows.WorkflowSyncPowerStates:  workflows.SyncPowerStates,
		// The reconciler (workflows/reconcile.go, docs/crash-safety.md).
		workflows.WorkflowReconcile: workflows.Reconcile,
		// API 1.89 (docs/api-versions.md).
		workflows.WorkflowChangeVirtualMedia: workflows.ChangeVirtualMedia,
		workflows.WorkflowVendorPassthru:     workflows.VendorPassthru,
		workflows.WorkflowCleanNode:          workflows.CleanNode,
		workflows.WorkflowServiceNode:        workflows.ServiceNode,
		// API 1.76 boot mode and secure boot (workflows/bootmode.go).
		workflows.WorkflowChangeBootMode: workflows.ChangeBootMode,
		// API 1.29 NMI and 1.63 indicators (workflows/nodemanagement.go).
		workflows.WorkflowNodeManagement: workflows.NodeManagement,
		// API 1.52 allocations (workflows/allocate.go).
		workflows.WorkflowAllocate: workflows.Allocate,
		// API 1.17 adopt (workflows/adoptnode.go).
		workflows.WorkflowAdoptNode: workflows.AdoptNode,
		// API 1.1 console (workflows/console.go).
		workflows.WorkflowSetConsoleNode: workflows.SetConsoleNode,
		// Rollouts (workflows/rollout.go, docs/rollouts.md).
		workflows.WorkflowRollout: workflows.Rollout,
	}
}

// Activities lists every activity method under the name workflows call it by.
func Activities(a *activities.Activities) map[string]any {
	return map[string]any{
		workflows.ActLoadNode:             a.LoadNode,
		workflows.ActRecordState:          a.RecordState,
		workflows.ActStoreConfigDrive:     a.StoreConfigDrive,
		workflows.ActRecordPowerState:     a.RecordPowerState,
		workflows.ActClearInstanceInfo:    a.ClearInstanceInfo,
		workflows.ActAllocateNode:         a.AllocateNode,
		workflows.ActPrepareBoot:          a.PrepareBoot,
		workflows.ActCleanBoot:            a.CleanBoot,
		workflows.ActSetBootDevice:        a.SetBootDevice,
		workflows.ActSetPower:             a.SetPower,
		workflows.ActGetPowerState:        a.GetPowerState,
		workflows.ActGetAgentSteps:        a.GetAgentSteps,
		workflows.ActRunAgentStep:         a.RunAgentStep,
		workflows.ActAgentPowerOff:        a.AgentPowerOff,
		workflows.ActValidateHardware:     a.ValidateHardware,
		workflows.ActApplyInventory:       a.ApplyInventory,
		workflows.ActRecordInspection:     a.RecordInspection,
		workflows.ActCollectInventory:     a.CollectInventory,
		workflows.ActInspectOutOfBand:     a.InspectOutOfBand,
		workflows.ActFinalizeRescue:       a.FinalizeRescue,
		workflows.ActForgetRescuePassword: a.ForgetRescuePassword,
		workflows.ActValidateAdoption:     a.ValidateAdoption,
		// API 1.89 (docs/api-versions.md).
		workflows.ActAttachVirtualMedia: a.AttachVirtualMedia,
		workflows.ActDetachVirtualMedia: a.DetachVirtualMedia,
		workflows.ActReadVirtualMedia:   a.ReadVirtualMedia,
		workflows.ActCallVendorMethod:   a.CallVendorMethod,
		workflows.ActRunInterfaceStep:   a.RunInterfaceStep,
		workflows.ActRecordStepPlan:     a.RecordStepPlan,
		// API 1.76 boot mode and secure boot.
		workflows.ActSetBootMode:       a.SetBootMode,
		workflows.ActRecordBootMode:    a.RecordBootMode,
		workflows.ActCacheBIOSSettings: a.CacheBIOSSettings,
		// Firmware updates (workflows/firmware.go).
		workflows.ActStartFirmwareUpdate: a.StartFirmwareUpdate,
		workflows.ActPollFirmwareTask:    a.PollFirmwareTask,
		workflows.ActRecordFirmware:      a.RecordFirmware,
		// API 1.29 NMI and 1.63 indicators.
		workflows.ActInjectNMI:      a.InjectNMI,
		workflows.ActReadIndicators: a.ReadIndicators,
		workflows.ActSetIndicator:   a.SetIndicator,
		// API 1.1 console (workflows/console.go).
		workflows.ActStartConsole:       a.StartConsole,
		workflows.ActStopConsole:        a.StopConsole,
		workflows.ActPrepareConsoleStop: a.PrepareConsoleStop,
		workflows.ActRecordConsole:      a.RecordConsole,
	}
}

// New builds the workers of one process: one on the workflow queue (which
// also runs local activities), one per conductor group on its hardware
// queue and, with a ConsoleHolder, one per group on this process's console
// queue (bring its consoles back with RestoreConsoles before Start). Start them with Run or Start.
func New(c client.Client, a *activities.Activities, opts Options) ([]sdkworker.Worker, error) {
	if opts.MaxConcurrentActivities == 0 {
		opts.MaxConcurrentActivities = DefaultMaxConcurrentActivities
	}
	if opts.MaxConcurrentWorkflowTasks == 0 {
		opts.MaxConcurrentWorkflowTasks = DefaultMaxConcurrentWorkflowTasks
	}
	if opts.MaxConcurrentLocalActivities == 0 {
		opts.MaxConcurrentLocalActivities = DefaultMaxConcurrentLocalActivities
	}
	if opts.WorkflowTaskPollers == 0 {
		opts.WorkflowTaskPollers = DefaultWorkflowTaskPollers
	}
	if opts.ActivityTaskPollers == 0 {
		opts.ActivityTaskPollers = DefaultActivityTaskPollers
	}
	if len(opts.ConductorGroups) == 0 {
		opts.ConductorGroups = []string{""}
	}
	if !opts.SignalKeys.Configured() {
		return nil, errors.New("worker: no signal key configured")
	}
	acts := Activities(a)
	acts[workflows.ActVerifySignal] = signalVerifier{keys: opts.SignalKeys, tokens: storeTokens(a)}.verify
	// The power sync needs the Temporal client to skip nodes a workflow holds.
	acts[workflows.ActSyncPowerStates] = activities.NewPowerSync(a, c).SyncPowerStates
	// The reconciler reads visibility, and starts and ends node workflows.
	rec := activities.NewReconciler(a, c)
	acts[workflows.ActReconcileFacts] = rec.ReconcileFacts
	acts[workflows.ActReconcileRepair] = rec.ReconcileRepair
	// A rollout's node operations go through the API's own provision path
	// (apiserver.NodeOperator, which the process builds: see Options).
	if opts.Rollouts != nil {
		acts[workflows.ActRolloutResolve] = opts.Rollouts.Resolve
		acts[workflows.ActRolloutStartNode] = opts.Rollouts.StartNode
		acts[workflows.ActRolloutAwait] = opts.Rollouts.Await
		acts[workflows.ActRolloutForget] = opts.Rollouts.Forget
	}
	wf := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{
		MaxConcurrentWorkflowTaskExecutionSize:  opts.MaxConcurrentWorkflowTasks,
		MaxConcurrentLocalActivityExecutionSize: opts.MaxConcurrentLocalActivities,
		MaxConcurrentWorkflowTaskPollers:        opts.WorkflowTaskPollers,
		// Hardware activities go to the group queues; this worker only runs
		// local ones, so it does not poll for activity tasks at all.
		LocalActivityWorkerOnly:     true,
		DisableRegistrationAliasing: true,
	})
	for name, fn := range Workflows() {
		wf.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	for name, fn := range acts {
		wf.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	workers := []sdkworker.Worker{wf}
	seen := map[string]bool{}
	for _, g := range opts.ConductorGroups {
		q := workflows.HardwareQueue(g)
		if seen[q] {
			continue
		}
		seen[q] = true
		hw := sdkworker.New(c, q, sdkworker.Options{
			MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
			MaxConcurrentActivityTaskPollers:   opts.ActivityTaskPollers,
			DisableWorkflowWorker:              true,
			// Every BMC and agent call reports while it runs: its heartbeat
			// timeout notices a worker that died.
			Interceptors: []interceptor.WorkerInterceptor{&activities.KeepAliveInterceptor{}},
		})
		for name, fn := range acts {
			hw.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
		}
		workers = append(workers, hw)
		if opts.ConsoleHolder != "" {
			cq := sdkworker.New(c, workflows.ConsoleQueue(g, opts.ConsoleHolder), sdkworker.Options{
				MaxConcurrentActivityTaskPollers: 2,
				DisableWorkflowWorker:            true,
			})
			cq.RegisterActivityWithOptions(a.StopConsole, activity.RegisterOptions{Name: workflows.ActStopConsole})
			workers = append(workers, cq)
		}
	}
	return workers, nil
}

// Start starts every worker; Stop them with Stop.
func Start(ws []sdkworker.Worker) error {
	for i, w := range ws {
		if err := w.Start(); err != nil {
			Stop(ws[:i])
			return fmt.Errorf("start worker: %w", err)
		}
	}
	return nil
}

// Stop stops every worker.
func Stop(ws []sdkworker.Worker) {
	for _, w := range ws {
		w.Stop()
	}
}

// signalVerifier is the ActVerifySignal local activity: it holds the key the
// workflow must not see, and reads the node's current agent token (nil
// tokens: the token is not checked).
type signalVerifier struct {
	keys   signature.Keys
	tokens func(ctx context.Context, node string) (string, error)
}

// storeTokens reads a node's agent token from the store.
func storeTokens(a *activities.Activities) func(context.Context, string) (string, error) {
	if a == nil || a.Store == nil {
		return nil
	}
	return func(ctx context.Context, node string) (string, error) {
		n, err := a.Store.GetNode(ctx, node)
		if err != nil {
			return "", fmt.Errorf("read agent token of node %s: %w", node, err)
		}
		tok, _ := n.DriverInternalInfo[store.KeyAgentToken].(string)
		return tok, nil
	}
}

// verify answers why a heartbeat signal is not authentic (empty if it is) and
// logs the refusal with the node and the workflow. Authentic is: signed with
// the key, recent, and accepted with the agent token the node holds now.
func (v signalVerifier) verify(ctx context.Context, in workflows.VerifySignalInput) (workflows.SignalVerdict, error) {
	version, err := signature.VerifyVersion(v.keys, in.NodeUUID, in.Heartbeat, time.Now())
	// A signal of an API of the release before (V1) names no token: it is
	// accepted unbound while the APIs are upgraded after the workers.
	if err == nil && version == signature.V2 && v.tokens != nil {
		tok, terr := v.tokenWaiting(ctx, in)
		if terr != nil {
			return workflows.SignalVerdict{}, terr
		}
		err = signature.CheckToken(in.Heartbeat, tok)
	}
	if err == nil {
		return workflows.SignalVerdict{}, nil
	}
	activity.GetLogger(ctx).Warn("heartbeat signal refused", "node", in.NodeUUID,
		"workflow", activity.GetInfo(ctx).WorkflowExecution.ID, "reason", err.Error(),
		"callback_url", in.Heartbeat.CallbackURL)
	return workflows.SignalVerdict{Reason: err.Error()}, nil
}

// signalStoreWait bounds the pause between two reads of a node's token
// while the database does not answer.
const signalStoreWait = 10 * time.Second

// tokenWaiting reads the node's agent token, waiting out a database that
// does not answer for as long as the signal stays fresh enough to be
// accepted (signature.MaxAge, less a margin for the rest of the check), or
// the activity's deadline: a heartbeat the API accepted just before the
// database went away is checked once it is back, not dropped.
func (v signalVerifier) tokenWaiting(ctx context.Context, in workflows.VerifySignalInput) (string, error) {
	fresh := in.Heartbeat.ReceivedAt.Add(signature.MaxAge - 30*time.Second)
	delay := 500 * time.Millisecond
	for {
		tok, err := v.tokens(ctx, in.NodeUUID)
		if err == nil || !store.IsUnavailable(err) || time.Now().Add(delay).After(fresh) {
			return tok, err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Now().Add(delay).After(deadline) {
			return tok, err
		}
		activity.GetLogger(ctx).Warn("heartbeat signal: the database does not answer; its check waits", "node", in.NodeUUID, "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return tok, err
		case <-time.After(delay):
		}
		delay = min(2*delay, signalStoreWait)
	}
}

// RestoreConsoles brings back the consoles of the groups that this process
// held before it restarted, or whose holder is gone (activities
// RestoreConsoles); call it before Start, so that a disable sent meanwhile
// reaches the endpoints once they exist.
func RestoreConsoles(ctx context.Context, a *activities.Activities, groups []string, log *slog.Logger) {
	if a.Consoles == nil {
		return
	}
	if len(groups) == 0 {
		groups = []string{""}
	}
	for _, g := range groups {
		nodes, err := a.RestoreConsoles(ctx, g)
		if err != nil {
			log.Error("consoles not restored", "conductor_group", g, "error", err)
		}
		if len(nodes) > 0 {
			log.Info("consoles restored", "conductor_group", g, "nodes", nodes)
		}
	}
}

// WatchConsoles checks, every interval, the consoles this process holds
// against the store and closes those no node records it holding any more
// (activities ReconcileConsoles), until stop is called.
func WatchConsoles(a *activities.Activities, interval time.Duration, log *slog.Logger) (stop func()) {
	if a.Consoles == nil || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			closed, err := a.ReconcileConsoles(ctx, interval)
			if err != nil && ctx.Err() == nil {
				log.Warn("consoles not checked", "error", err)
			}
			if len(closed) > 0 {
				log.Info("consoles closed: their nodes no longer record this worker holding them", "nodes", closed)
			}
		}
	}()
	return func() { cancel(); <-done }
}
