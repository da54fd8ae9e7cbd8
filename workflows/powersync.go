package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Power-state sync: Ironic's periodic _sync_power_states, one long-running
// workflow per conductor group. Every Interval a durable timer fires and one
// activity on the group's hardware queue reads every node's power state
// from its BMC and stores what changed. One activity per tick, not one per
// node, keeps the history a few events per tick whatever the group's size;
// continue-as-new every IterationsPerRun ticks keeps it bounded.
const (
	// ActSyncPowerStates is the batch activity of one tick (regular, on the
	// group's hardware queue).
	ActSyncPowerStates = "SyncPowerStates"
	// QueryPowerSyncStatus answers a PowerSyncStatus.
	QueryPowerSyncStatus = "power-sync-status"
)

// Named defaults of the power sync, Ironic's where Ironic has one.
const (
	// DefaultPowerSyncInterval is Ironic's [conductor]sync_power_state_interval.
	DefaultPowerSyncInterval = 120 * time.Second
	// DefaultPowerSyncMaxRetries is Ironic's power_state_sync_max_retries:
	// consecutive failed reads before the node goes to maintenance.
	DefaultPowerSyncMaxRetries = 3
	// DefaultPowerRecoveryInterval is Ironic's power_failure_recovery_interval:
	// how often nodes in maintenance for a power failure are tried again.
	DefaultPowerRecoveryInterval = 300 * time.Second
	// DefaultPowerSyncWorkers is Ironic's sync_power_state_workers: BMC reads
	// in flight at once within one tick.
	DefaultPowerSyncWorkers = 8
	// DefaultPowerSyncNodeTimeout bounds one node's BMC read, so that one
	// dead BMC cannot hold a reader for the whole tick.
	DefaultPowerSyncNodeTimeout = 60 * time.Second
	// DefaultPowerSyncBatchTimeout bounds one tick's activity; nodes not
	// reached by then are read on the next tick.
	DefaultPowerSyncBatchTimeout = 10 * time.Minute
	// DefaultPowerSyncHeartbeatTimeout: a worker that dies mid-tick is noticed
	// this quickly instead of at the batch timeout.
	DefaultPowerSyncHeartbeatTimeout = time.Minute
	// DefaultPowerSyncIterations is how many ticks one run does before it
	// continues as new.
	DefaultPowerSyncIterations = 100
)

// FaultPowerFailure is the fault Ironic records on a node whose BMC stopped
// answering power-state reads; only maintenance with this fault is cleared
// automatically.
const FaultPowerFailure = "power failure"

// PowerSyncWorkflowID is the one power-sync workflow of a conductor group
// ("power-sync-default" for the empty group).
func PowerSyncWorkflowID(conductorGroup string) string {
	if conductorGroup == "" {
		conductorGroup = "default"
	}
	return "power-sync-" + conductorGroup
}

// SyncPowerInput configures one group's power sync. Zero values take the
// named defaults. LastRecovery is state carried across continue-as-new.
type SyncPowerInput struct {
	ConductorGroup   string        `json:"conductor_group"`
	Interval         time.Duration `json:"interval"`
	MaxRetries       int           `json:"max_retries"`
	RecoveryInterval time.Duration `json:"recovery_interval"`
	Workers          int           `json:"workers"`
	NodeTimeout      time.Duration `json:"node_timeout"`
	BatchTimeout     time.Duration `json:"batch_timeout"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	IterationsPerRun int           `json:"iterations_per_run"`
	// LastRecovery is when power-failure nodes were last tried.
	LastRecovery time.Time `json:"last_recovery"`
}

func (in SyncPowerInput) withDefaults() SyncPowerInput {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&in.Interval, DefaultPowerSyncInterval)
	def(&in.RecoveryInterval, DefaultPowerRecoveryInterval)
	def(&in.NodeTimeout, DefaultPowerSyncNodeTimeout)
	def(&in.BatchTimeout, DefaultPowerSyncBatchTimeout)
	def(&in.HeartbeatTimeout, DefaultPowerSyncHeartbeatTimeout)
	if in.MaxRetries <= 0 {
		in.MaxRetries = DefaultPowerSyncMaxRetries
	}
	if in.Workers <= 0 {
		in.Workers = DefaultPowerSyncWorkers
	}
	if in.IterationsPerRun <= 0 {
		in.IterationsPerRun = DefaultPowerSyncIterations
	}
	return in
}

// PowerSyncBatch is one tick's work for the activity.
type PowerSyncBatch struct {
	ConductorGroup string `json:"conductor_group"`
	MaxRetries     int    `json:"max_retries"`
	// Recover also reads nodes in maintenance with fault "power failure"
	// and takes them out of maintenance when their BMC answers.
	Recover     bool          `json:"recover"`
	Workers     int           `json:"workers"`
	NodeTimeout time.Duration `json:"node_timeout"`
}

// PowerSyncResult says what one tick did. Node lists name only the rare
// events; the rest are counts, so that history stays small.
type PowerSyncResult struct {
	// Nodes in the group.
	Nodes int `json:"nodes"`
	// Checked: the BMC answered.
	Checked int `json:"checked"`
	// Changed: the stored power state was updated.
	Changed int `json:"changed"`
	// Failed: the BMC did not answer (the node's consecutive-failure count
	// went up, below MaxRetries).
	Failed int `json:"failed"`
	// Held: a workflow holds the node or an operation is in flight.
	Held int `json:"held"`
	// Skipped: enroll, wait states, or maintenance for another reason.
	Skipped int `json:"skipped"`
	// Deferred: not reached before the batch deadline; next tick.
	Deferred int `json:"deferred"`
	// Maintenance lists the nodes put into maintenance this tick.
	Maintenance []string `json:"maintenance,omitempty"`
	// Recovered lists the nodes taken out of power-failure maintenance.
	Recovered []string `json:"recovered,omitempty"`
}

// PowerSyncStatus answers QueryPowerSyncStatus.
type PowerSyncStatus struct {
	ConductorGroup string          `json:"conductor_group"`
	Ticks          int             `json:"ticks"` // in this run
	LastTick       time.Time       `json:"last_tick"`
	Last           PowerSyncResult `json:"last"`
	LastError      string          `json:"last_error,omitempty"`
}

// SyncPowerStates keeps a conductor group's stored power states in step with
// the hardware, forever: step 1, wait Interval on a durable timer; step 2,
// run one batch on the group's hardware queue (power-failure nodes too once
// RecoveryInterval has passed); after IterationsPerRun ticks, continue as
// new. A failed batch is logged and the next tick is its retry: the sync
// never ends on an error.
func SyncPowerStates(ctx workflow.Context, in SyncPowerInput) error {
	in = in.withDefaults()
	log := workflow.GetLogger(ctx)
	status := PowerSyncStatus{ConductorGroup: in.ConductorGroup}
	if err := workflow.SetQueryHandler(ctx, QueryPowerSyncStatus, func() (PowerSyncStatus, error) { return status, nil }); err != nil {
		return err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(in.ConductorGroup),
		StartToCloseTimeout: in.BatchTimeout,
		HeartbeatTimeout:    in.HeartbeatTimeout,
		// One attempt: the next tick is the retry, and a repeated batch
		// would count a node's failure twice.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	for i := 0; i < in.IterationsPerRun; i++ {
		if err := workflow.Sleep(ctx, in.Interval); err != nil {
			return err
		}
		now := workflow.Now(ctx)
		batch := PowerSyncBatch{
			ConductorGroup: in.ConductorGroup,
			MaxRetries:     in.MaxRetries,
			Recover:        in.LastRecovery.IsZero() || now.Sub(in.LastRecovery) >= in.RecoveryInterval,
			Workers:        in.Workers,
			NodeTimeout:    in.NodeTimeout,
		}
		var res PowerSyncResult
		err := workflow.ExecuteActivity(actx, ActSyncPowerStates, batch).Get(ctx, &res)
		status.Ticks++
		status.LastTick = now
		if err != nil {
			status.LastError = errorText(err)
			log.Warn("power sync batch failed; the next tick retries", "conductor_group", in.ConductorGroup, "error", status.LastError)
			continue
		}
		status.Last, status.LastError = res, ""
		if batch.Recover {
			in.LastRecovery = now
		}
		switch {
		case len(res.Maintenance) > 0 || res.Deferred > 0:
			log.Warn("power sync: nodes to look at", "conductor_group", in.ConductorGroup, "maintenance", res.Maintenance,
				"recovered", res.Recovered, "deferred", res.Deferred)
		case len(res.Recovered) > 0:
			log.Info("power sync: nodes recovered from power failure", "conductor_group", in.ConductorGroup, "recovered", res.Recovered)
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return workflow.NewContinueAsNewError(ctx, WorkflowSyncPowerStates, in)
}
