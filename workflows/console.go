package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// A node's console (API 1.1, PUT /v1/nodes/{node}/states/console;
// docs/console.md). The console lives in one worker process, the holder:
// enabling runs StartConsole on the node's conductor-group queue, and the
// worker that takes it opens the endpoints and answers its own console
// queue (ConsoleQueue), which the node's driver_internal_info records;
// disabling revokes the tokens of the browser pages, then runs StopConsole
// on the holder's console queue, so that it reaches the process that holds
// the listeners, and only then records console_enabled false. The
// workflow runs under its own ID (ConsoleWorkflowID), not the node's
// lock: Ironic releases a node's lock while a deploy, cleaning or rescue
// waits for its agent, and its users watch the machine through the
// console exactly then; here the node's operation holds its lock
// throughout, so a console change that waited for it would come too late.
// Two console changes of one node still run one at a time. Console
// traffic never passes through any workflow.

const (
	// WorkflowSetConsoleNode is the name SetConsoleNode is registered and
	// started under.
	WorkflowSetConsoleNode = "SetConsoleNode"
	// ActStartConsole opens the node's console endpoints on the worker
	// that runs it (a regular activity on the conductor-group queue).
	ActStartConsole = "StartConsole"
	// ActStopConsole closes the node's endpoints and every session on
	// them, on the holder's console queue.
	ActStopConsole = "StopConsole"
	// ActPrepareConsoleStop revokes the node's console tokens and answers
	// who holds the console (local).
	ActPrepareConsoleStop = "PrepareConsoleStop"
	// ActRecordConsole records console_enabled, the holder and its
	// endpoints, and the node's history (local).
	ActRecordConsole = "RecordConsole"
)

// DefaultConsoleStopWait bounds how long a disable waits for the holder to
// take its StopConsole task: a holder that does not poll within it is
// gone, and a process that is gone holds no listener.
const DefaultConsoleStopWait = 30 * time.Second

// ConsoleWorkflowID is the ID a node's console change runs under: one at a
// time per node, beside whatever operation holds the node's lock.
func ConsoleWorkflowID(nodeUUID string) string { return "console-" + nodeUUID }

// ConsoleQueue is the task queue of one worker's consoles in a conductor
// group: <the group's hardware queue>/console/<the worker's conductor
// hostname>.
func ConsoleQueue(conductorGroup, holder string) string {
	return HardwareQueue(conductorGroup) + "/console/" + holder
}

// ConsoleRequest is a console change asked through the API.
type ConsoleRequest struct {
	NodeUUID       string `json:"node_uuid"`
	ConductorGroup string `json:"conductor_group"`
	Enabled        bool   `json:"enabled"`
}

// ConsoleInput is the console activities' input.
type ConsoleInput struct {
	NodeUUID string `json:"node_uuid"`
}

// ConsoleHeld is where a node's console lives: the holder's conductor
// hostname and the host:port of its endpoints.
type ConsoleHeld struct {
	Holder    string `json:"holder,omitempty"`
	Serial    string `json:"serial,omitempty"`
	Graphical string `json:"graphical,omitempty"`
	// HolderAlive: the holder heartbeats as a conductor (PrepareConsoleStop).
	HolderAlive bool `json:"holder_alive,omitempty"`
}

// RecordConsoleInput is ActRecordConsole's input: the outcome of a change.
type RecordConsoleInput struct {
	NodeUUID string      `json:"node_uuid"`
	Enabled  bool        `json:"enabled"`
	Held     ConsoleHeld `json:"held"`
	// Error, when set, is why the change failed: console_enabled is left
	// as it was and the history says so.
	Error string `json:"error,omitempty"`
}

// SetConsoleNode enables or disables a node's console.
func SetConsoleNode(ctx workflow.Context, req ConsoleRequest) error {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpConsole)
	if err != nil {
		return err
	}
	group := r.node.ConductorGroup
	record := func(in RecordConsoleInput) error {
		in.NodeUUID = r.node.UUID
		return r.rec.local(ActRecordConsole, in, nil)
	}
	failed := func(err error) error {
		op := "disabling"
		if req.Enabled {
			op = "enabling"
		}
		msg := fmt.Sprintf("Error %s the console on node %s. Reason: %s", op, r.node.UUID, activityMessage(err))
		if rerr := record(RecordConsoleInput{Enabled: !req.Enabled, Error: msg}); rerr != nil {
			return rerr
		}
		return err
	}
	if req.Enabled {
		// Step 1: a worker of the group opens the endpoints.
		var held ConsoleHeld
		if err := consoleCall(ctx, HardwareQueue(group), ActStartConsole, r.node.UUID, 0, &held); err != nil {
			return failed(err)
		}
		// Step 2: console_enabled true, with the holder and its address.
		return record(RecordConsoleInput{Enabled: true, Held: held})
	}
	// Step 1: no new browser session from now on.
	var held ConsoleHeld
	if err := r.rec.local(ActPrepareConsoleStop, ConsoleInput{NodeUUID: r.node.UUID}, &held); err != nil {
		return failed(err)
	}
	// Step 2: the holder closes the listeners and every session.
	if held.Holder != "" && held.HolderAlive {
		err := consoleCall(ctx, ConsoleQueue(group, held.Holder), ActStopConsole, r.node.UUID, DefaultConsoleStopWait, nil)
		var timeout *temporal.TimeoutError
		if err != nil && !errors.As(err, &timeout) {
			return failed(err)
		}
	}
	// Step 3: console_enabled false.
	return record(RecordConsoleInput{Enabled: false})
}

// consoleCall runs a console activity on queue; scheduleToStart, when set,
// bounds the wait for a worker to take it.
func consoleCall(ctx workflow.Context, queue, name, node string, scheduleToStart time.Duration, out any) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: scheduleToStart,
		StartToCloseTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{ErrTypeInvalidConfig, ErrTypeNodeGone},
		},
	})
	return workflow.ExecuteActivity(actx, name, ConsoleInput{NodeUUID: node}).Get(actx, out)
}

// activityMessage is an activity failure's own words.
func activityMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}
