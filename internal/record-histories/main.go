// Command record-histories writes the histories of workflows/replay_test.go: it runs
// this release's workflows on a Temporal dev server against fake
// activities, one workflow per scenario, and saves each history as JSON.
// At each release, after the gates against the release before were retired
// (docs/versioning.md), record into the directory named for VERSION:
//
//	make record-histories
//
// (IRONFLOW_TEMPORAL_BIN=bin/temporal go run ./internal/record-histories
// workflows/testdata/history/$(cat VERSION)); from then on
// TestHistoriesOfTheEarlierVersionReplay proves that the release's
// workflows in flight replay on every later build.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/worker"
	"github.com/ironflow/ironflow/workflows"
)

// scenario is one workflow run: its node's deploy interface, the request,
// the fake calls that fail (activity and detail -> failures left), and what
// the agent or the operator sends it.
type scenario struct {
	name   string
	wf     string
	deploy string
	// rescue is the node's rescue interface ("" for none).
	rescue string
	// inspect is the node's inspect interface ("" for agent).
	inspect hardware.Interface
	// firmware is the node's firmware interface ("" for none).
	firmware hardware.Interface
	// bios is the node's bios interface ("" for fake).
	bios hardware.Interface
	// disablePowerOff is the node's disable_power_off (API 1.95).
	disablePowerOff bool
	// remoteBMC runs BMC activities on the group queue instead of locally.
	remoteBMC bool
	// policy changes the node's policy (nil: policy()).
	policy func(*workflows.Policy)
	// hangs are the agent steps (interface.step) whose command never ends:
	// the agent stops heartbeating while it runs.
	hangs []string
	// lost are the agent steps whose command the agent loses once (the
	// machine rebooted under it): the workflow runs them again.
	lost  []string
	req   func(uuid string) any
	fails map[string]int
	drive func(c client.Client, id string)
	node  workflows.NodeInfo
}

var (
	mu        sync.Mutex
	nodes     = map[string]*scenario{}
	failsLeft = map[string]map[string]int{}
	polls     = map[string]int{}
)

// consoleHolder is the conductor hostname of the recorder's console queue.
const consoleHolder = "recorder"

func policy() workflows.Policy {
	return workflows.Policy{CallbackTimeout: 3 * time.Second, HeartbeatTimeout: time.Minute, OperatorWaitTimeout: 4 * time.Second,
		BMCAttempts: 2, BMCInitialInterval: 100 * time.Millisecond, BMCCallTimeout: 10 * time.Second,
		RescueCallbackTimeout: 3 * time.Second, AgentActivityHeartbeat: 30 * time.Second, AgentCommandTimeout: time.Minute, EraseDevicesMetadataPriority: 99, LocalBMC: true}
}

func fail(uuid, key string) error {
	mu.Lock()
	defer mu.Unlock()
	if failsLeft[uuid][key] > 0 {
		failsLeft[uuid][key]--
		return temporal.NewNonRetryableApplicationError(key+" failed on purpose", workflows.ErrTypeAgentStepFailed, nil)
	}
	return nil
}

func acts() map[string]any {
	return map[string]any{
		workflows.ActLoadNode: func(ctx context.Context, uuid string) (workflows.NodeInfo, error) {
			mu.Lock()
			defer mu.Unlock()
			return nodes[uuid].node, nil
		},
		workflows.ActRecordState:       func(ctx context.Context, in workflows.RecordStateInput) error { return nil },
		workflows.ActStoreConfigDrive:  func(ctx context.Context, in workflows.ConfigDriveInput) error { return nil },
		workflows.ActRecordPowerState:  func(ctx context.Context, in workflows.PowerStateRecord) error { return nil },
		workflows.ActClearInstanceInfo: func(ctx context.Context, uuid string) error { return nil },
		workflows.ActApplyInventory:    func(ctx context.Context, uuid string) error { return nil },
		workflows.ActRecordInspection:  func(ctx context.Context, in workflows.InspectionRecord) error { return nil },
		workflows.ActPrepareBoot:       func(ctx context.Context, in workflows.BootInput) error { return fail(in.Node.UUID, "PrepareBoot") },
		workflows.ActCleanBoot:         func(ctx context.Context, in workflows.BootInput) error { return nil },
		workflows.ActSetBootDevice: func(ctx context.Context, in workflows.BootDeviceInput) error {
			return fail(in.Node.UUID, "SetBootDevice "+in.Device)
		},
		workflows.ActAttachVirtualMedia: func(ctx context.Context, in workflows.VirtualMediaInput) error {
			return fail(in.Node.UUID, "AttachVirtualMedia")
		},
		workflows.ActDetachVirtualMedia: func(ctx context.Context, in workflows.VirtualMediaInput) error { return nil },
		workflows.ActReadVirtualMedia: func(ctx context.Context, in workflows.VirtualMediaInput) ([]workflows.VirtualMediaDevice, error) {
			return []workflows.VirtualMediaDevice{{MediaTypes: []string{"CD", "DVD"}, Inserted: true, Image: "http://images.example/boot.iso", ImageName: "boot.iso"}}, nil
		},
		workflows.ActInjectNMI: func(ctx context.Context, in workflows.IndicatorInput) error { return nil },
		// The console: held by this recorder's console queue.
		workflows.ActStartConsole: func(ctx context.Context, in workflows.ConsoleInput) (workflows.ConsoleHeld, error) {
			return workflows.ConsoleHeld{Holder: consoleHolder, Serial: "127.0.0.1:10000"}, nil
		},
		workflows.ActStopConsole: func(ctx context.Context, in workflows.ConsoleInput) error { return nil },
		// A rollout's activities (workflows/rollout.go): the selector is
		// the node list; every node starts, and the one ending in "9"
		// fails.
		workflows.ActRolloutResolve: func(ctx context.Context, in workflows.RolloutResolveInput) ([]string, error) {
			return in.Selector.Nodes, nil
		},
		workflows.ActRolloutStartNode: func(ctx context.Context, in workflows.RolloutStartInput) (workflows.RolloutStartResult, error) {
			return workflows.RolloutStartResult{Started: true, Expect: "active"}, nil
		},
		workflows.ActRolloutAwait: func(ctx context.Context, in workflows.RolloutAwaitInput) ([]workflows.RolloutNodeEnd, error) {
			var out []workflows.RolloutNodeEnd
			for _, n := range in.Nodes {
				ok := !strings.HasSuffix(n.UUID, "9")
				out = append(out, workflows.RolloutNodeEnd{UUID: n.UUID, OK: ok, ProvisionState: map[bool]string{true: "active", false: "deploy failed"}[ok]})
			}
			return out, nil
		},
		workflows.ActPrepareConsoleStop: func(ctx context.Context, in workflows.ConsoleInput) (workflows.ConsoleHeld, error) {
			return workflows.ConsoleHeld{Holder: consoleHolder, Serial: "127.0.0.1:10000", HolderAlive: true}, nil
		},
		workflows.ActRecordConsole: func(ctx context.Context, in workflows.RecordConsoleInput) error { return nil },
		workflows.ActReadIndicators: func(ctx context.Context, in workflows.IndicatorInput) ([]workflows.Indicator, error) {
			return []workflows.Indicator{{Component: "system", Name: "led", States: []string{"blinking", "off", "on"}, State: "on"}}, nil
		},
		workflows.ActSetIndicator: func(ctx context.Context, in workflows.IndicatorInput) error { return nil },
		workflows.ActCallVendorMethod: func(ctx context.Context, in workflows.VendorMethodInput) (any, error) {
			if fail(in.Node.UUID, "CallVendorMethod") != nil {
				return nil, temporal.NewNonRetryableApplicationError("Redfish exception occurred. Error: Redfish delete_subscription failed on purpose", workflows.ErrTypeVendorNotFound, nil)
			}
			if in.Method == hardware.VendorDeleteSubscription {
				return nil, nil
			}
			return map[string]any{"Id": "1", "Destination": in.Args["Destination"], "Context": "", "Protocol": "Redfish", "EventTypes": []string{"Alert"}}, nil
		},
		workflows.ActSetBootMode: func(ctx context.Context, in workflows.BootModeInput) (workflows.BootModeResult, error) {
			return workflows.BootModeResult{BootMode: in.BootMode, SecureBoot: in.SecureBoot}, nil
		},
		workflows.ActRecordBootMode: func(ctx context.Context, in workflows.BootModeRecord) error { return nil },
		workflows.ActAllocateNode: func(ctx context.Context, in workflows.AllocationRequest) (workflows.AllocationResult, error) {
			return workflows.AllocationResult{NodeUUID: "00000000-0000-4000-8000-000000000000"}, nil
		},
		workflows.ActCacheBIOSSettings: func(ctx context.Context, n workflows.NodeInfo) error { return nil },
		workflows.ActSetPower: func(ctx context.Context, in workflows.PowerInput) (string, error) {
			if in.Action == "power off" {
				return "power off", nil
			}
			return "power on", nil
		},
		workflows.ActGetPowerState: func(ctx context.Context, n workflows.NodeInfo) (string, error) { return "power off", nil },
		workflows.ActGetAgentSteps: func(ctx context.Context, in workflows.AgentStepsInput) ([]provision.Step, error) {
			if in.Kind == provision.StepKindService {
				return []provision.Step{{StepID: provision.StepID{Interface: "deploy", Step: "erase_pstore"}, Abortable: true}}, nil
			}
			if in.Kind == provision.StepKindDeploy {
				// The agent's deploy steps (agent/steps.go).
				return []provision.Step{{StepID: provision.StepWriteImage, Priority: 80, ArgsInfo: map[string]provision.ArgInfo{"image_info": {}, "configdrive": {}}},
					{StepID: provision.StepEraseDevicesMetadata}}, nil
			}
			return []provision.Step{{StepID: provision.StepEraseDevicesMetadata, Priority: 0}, {StepID: provision.StepEraseDevices, Priority: 10},
				// A step that asks for a reboot once done.
				{StepID: provision.StepID{Interface: "deploy", Step: "apply_firmware"}, RebootRequested: true}}, nil
		},
		workflows.ActRunAgentStep: func(ctx context.Context, in workflows.AgentStepInput) (workflows.AgentStepResult, error) {
			if err := fail(in.Agent.NodeUUID, in.Step.Name()); err != nil {
				return workflows.AgentStepResult{}, err
			}
			if loses(in.Agent.NodeUUID, in.Step.Name()) {
				return workflows.AgentStepResult{}, temporal.NewNonRetryableApplicationError("the agent no longer knows command c1 (the machine rebooted)",
					workflows.ErrTypeAgentCommandLost, nil, workflows.AgentCommandLost{CommandID: "c1", Progress: &workflows.StepProgress{
						Stage: "erasing", Fraction: 0.5, ElapsedSeconds: 3, Checkpoint: []byte(`{"elapsed_seconds":3}`)}})
			}
			if hangs(in.Agent.NodeUUID, in.Step.Name()) {
				// The agent is gone mid-command: the activity waits until
				// the workflow's liveness timer cancels it.
				for ctx.Err() == nil {
					activity.RecordHeartbeat(ctx)
					time.Sleep(200 * time.Millisecond)
				}
				return workflows.AgentStepResult{}, ctx.Err()
			}
			return workflows.AgentStepResult{CommandID: "c1", Status: "SUCCEEDED"}, nil
		},
		workflows.ActAgentPowerOff:    func(ctx context.Context, in workflows.AgentInput) error { return nil },
		workflows.ActValidateHardware: func(ctx context.Context, n workflows.NodeInfo) error { return nil },
		workflows.ActCollectInventory: func(ctx context.Context, in workflows.AgentInput) error { return nil },
		workflows.ActInspectOutOfBand: func(ctx context.Context, n workflows.NodeInfo) error { return nil },
		workflows.ActFinalizeRescue: func(ctx context.Context, in workflows.AgentInput) error {
			return fail(in.NodeUUID, "FinalizeRescue")
		},
		workflows.ActForgetRescuePassword: func(ctx context.Context, uuid string) error { return nil },
		workflows.ActValidateAdoption: func(ctx context.Context, uuid string) (string, error) {
			if fail(uuid, "ValidateAdoption") != nil {
				return "Node " + uuid + " does not have any port associated with it", nil
			}
			return "", nil
		},
		workflows.ActRunInterfaceStep: func(ctx context.Context, in workflows.InterfaceStepInput) error {
			return fail(in.Node.UUID, in.Step.Name())
		},
		workflows.ActRecordStepPlan: func(ctx context.Context, in workflows.StepPlanRecord) error { return nil },
		// The firmware update's task runs for two polls, then completes.
		workflows.ActStartFirmwareUpdate: func(ctx context.Context, in workflows.FirmwareUpdateInput) (workflows.FirmwareTaskRef, error) {
			return workflows.FirmwareTaskRef{URI: "/redfish/v1/TaskService/Tasks/1", Timeout: 10 * time.Second, PollInterval: 200 * time.Millisecond},
				fail(in.Node.UUID, "StartFirmwareUpdate")
		},
		workflows.ActPollFirmwareTask: func(ctx context.Context, in workflows.FirmwareTaskInput) (workflows.FirmwareTaskState, error) {
			mu.Lock()
			defer mu.Unlock()
			polls[in.Node.UUID]++
			if polls[in.Node.UUID] < 2 {
				return workflows.FirmwareTaskState{State: "Running", Percent: 50}, nil
			}
			if polls[in.Node.UUID] < 3 {
				// The image waits for the host's reset.
				return workflows.FirmwareTaskState{State: "Running", Percent: 100, ResetRequired: true,
					Messages: []string{"In order to complete the operation, a component reset is required"}}, nil
			}
			return workflows.FirmwareTaskState{State: "Completed", Percent: 100, Done: true}, nil
		},
		workflows.ActRecordFirmware: func(ctx context.Context, in workflows.FirmwareRecordInput) error { return nil },
	}
}

// loses reports whether node uuid's agent loses step's command now: once
// per step listed in the scenario's lost.
func loses(uuid, step string) bool {
	mu.Lock()
	defer mu.Unlock()
	sc := nodes[uuid]
	if i := slices.Index(sc.lost, step); i >= 0 {
		sc.lost = slices.Delete(sc.lost, i, i+1)
		return true
	}
	return false
}

// hangs reports whether node uuid's agent never finishes step.
func hangs(uuid, step string) bool {
	mu.Lock()
	defer mu.Unlock()
	return slices.Contains(nodes[uuid].hangs, step)
}

func main() {
	out := os.Args[1]
	must(os.MkdirAll(out, 0o755))
	temporalBin := os.Getenv("IRONFLOW_TEMPORAL_BIN")
	ctx := context.Background()
	srv, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{Bin: temporalBin, Port: 0, UIPort: -1,
		SearchAttributes: map[string]string{"NodeUUID": "Keyword", "ProvisionState": "Keyword", "Operation": "Keyword"}}, slog.Default())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	// Histories are recorded with plain payloads, so that the replay test
	// reads them without a key; IRONFLOW_PAYLOAD_KEY records them encrypted
	// as a production worker would (package payload), for a replay by hand.
	opts := client.Options{HostPort: srv.Address()}
	if key := os.Getenv("IRONFLOW_PAYLOAD_KEY"); key != "" {
		keys, err := payload.LoadKeys(key, "", "")
		if err != nil {
			log.Fatal(err)
		}
		codec, err := payload.NewCodec(keys)
		if err != nil {
			log.Fatal(err)
		}
		codec.Apply(&opts)
	}
	c, err := client.Dial(opts)
	if err != nil {
		log.Fatal(err)
	}
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{})
	for n, f := range worker.Workflows() {
		w.RegisterWorkflowWithOptions(f, workflow.RegisterOptions{Name: n})
	}
	hw := sdkworker.New(c, workflows.HardwareQueue(""), sdkworker.Options{DisableWorkflowWorker: true})
	// Heartbeats are signed as the API signs them, and verified by the
	// worker's check (package signature), so the histories hold the
	// verification a real deploy records.
	key := signature.Generate()
	all := acts()
	all[workflows.ActVerifySignal] = func(_ context.Context, in workflows.VerifySignalInput) (workflows.SignalVerdict, error) {
		if err := signature.Verify(signature.Keys{Current: key}, in.NodeUUID, in.Heartbeat, time.Now()); err != nil {
			return workflows.SignalVerdict{Reason: err.Error()}, nil
		}
		return workflows.SignalVerdict{}, nil
	}
	// Power sync's batch: the first tick's fails (the next tick retries),
	// the second puts a node into maintenance.
	var ticks int
	all[workflows.ActSyncPowerStates] = func(_ context.Context, in workflows.PowerSyncBatch) (workflows.PowerSyncResult, error) {
		mu.Lock()
		defer mu.Unlock()
		ticks++
		if ticks == 1 {
			return workflows.PowerSyncResult{}, temporal.NewNonRetryableApplicationError("the store is down on purpose", "StoreDown", nil)
		}
		return workflows.PowerSyncResult{Nodes: 3, Checked: 2, Changed: 1, Failed: 1, Maintenance: []string{"00000000-0000-4000-8000-000000000099"}}, nil
	}
	// The reconciler's pass: the first finds a provide the API never
	// started and a node whose restored row disagrees with its workflow.
	var passes int
	all[workflows.ActReconcileFacts] = func(_ context.Context, in workflows.ReconcileScan) (workflows.ReconcileFacts, error) {
		mu.Lock()
		defer mu.Unlock()
		passes++
		now := time.Now().UTC()
		if passes > 1 {
			return workflows.ReconcileFacts{At: now, Nodes: 2}, nil
		}
		long := now.Add(-time.Hour)
		return workflows.ReconcileFacts{At: now, Nodes: 2, Candidates: []workflows.NodeFacts{
			{NodeUUID: "00000000-0000-4000-8000-000000000097", State: provision.Cleaning, StateSince: long, AcceptedAt: long,
				Accepted: &provision.Accepted{Verb: provision.VerbProvide, From: provision.Manageable, Next: provision.Cleaning, Target: provision.Available}},
			{NodeUUID: "00000000-0000-4000-8000-000000000098", State: provision.Available, StateSince: long,
				Last: &workflows.RunFacts{WorkflowType: workflows.WorkflowDeployNode, RunID: "r", State: provision.Active, Status: "Completed", Started: long, Closed: now}},
		}}, nil
	}
	all[workflows.ActReconcileRepair] = func(_ context.Context, in workflows.RepairBatch) ([]workflows.RepairOutcome, error) {
		var out []workflows.RepairOutcome
		for _, r := range in.Repairs {
			out = append(out, workflows.RepairOutcome{Kind: r.Kind, NodeUUID: r.NodeUUID, From: r.From, To: r.To, Applied: true})
		}
		return out, nil
	}
	// The console queue of the worker that holds the scenarios' consoles.
	cq := sdkworker.New(c, workflows.ConsoleQueue("", consoleHolder), sdkworker.Options{DisableWorkflowWorker: true})
	for n, f := range all {
		w.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: n})
		hw.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: n})
		cq.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: n})
	}
	if err := cq.Start(); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	if err := hw.Start(); err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	defer hw.Stop()

	// signed is hb as the API sends it to workflow id.
	signed := func(id string, hb workflows.Heartbeat) workflows.Heartbeat {
		hb.ReceivedAt = time.Now().UTC()
		signature.Sign(key, strings.TrimPrefix(id, "node-"), &hb)
		return hb
	}
	hb := func(c client.Client, id string) {
		time.Sleep(500 * time.Millisecond)
		must(c.SignalWorkflow(ctx, id, "", workflows.SignalHeartbeat, signed(id, workflows.Heartbeat{CallbackURL: "http://10.0.0.5:9999", AgentVersion: "1"})))
	}
	signalAfter := func(d time.Duration, name string) func(c client.Client, id string) {
		return func(c client.Client, id string) {
			time.Sleep(d)
			must(c.SignalWorkflow(ctx, id, "", name, nil))
		}
	}
	both := func(fs ...func(client.Client, string)) func(client.Client, string) {
		return func(c client.Client, id string) {
			for _, f := range fs {
				f(c, id)
			}
		}
	}
	prov := func(verb provision.Verb, from provision.State) func(string) any {
		return func(uuid string) any {
			return provision.Request{NodeUUID: uuid, Verb: verb, FromState: from}
		}
	}
	deploy := prov(provision.VerbActive, provision.Available)
	cleanReq := func(steps string, disableRamdisk bool) func(string) any {
		return func(uuid string) any {
			return provision.Request{NodeUUID: uuid, Verb: provision.VerbClean, FromState: provision.Manageable,
				CleanSteps: json.RawMessage(steps), DisableRamdisk: disableRamdisk}
		}
	}
	serviceReq := func(steps string, disableRamdisk bool) func(string) any {
		return func(uuid string) any {
			return provision.Request{NodeUUID: uuid, Verb: provision.VerbService, FromState: provision.Active,
				ServiceSteps: json.RawMessage(steps), DisableRamdisk: disableRamdisk}
		}
	}
	sc := []*scenario{
		{name: "deploy-direct", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy, drive: hb},
		{name: "deploy-direct-bmc-on-group-queue", wf: workflows.WorkflowDeployNode, deploy: "direct", remoteBMC: true, req: deploy, drive: hb},
		{name: "deploy-direct-user-steps", wf: workflows.WorkflowDeployNode, deploy: "direct", drive: hb, req: func(uuid string) any {
			return provision.Request{NodeUUID: uuid, Verb: provision.VerbActive, FromState: provision.Available,
				ConfigDrive: json.RawMessage(`"H4sIAAAAAAAA"`),
				DeploySteps: json.RawMessage(`[{"interface":"deploy","step":"erase_devices_metadata","priority":90},{"interface":"deploy","step":"write_image","priority":80,"args":{"configdrive":"H4sIAAAAAAAA"}}]`)}
		}},
		// firmware.update as a deploy step above deploy.deploy's priority:
		// through the BMC before the agent boots.
		{name: "deploy-firmware-update-step", wf: workflows.WorkflowDeployNode, deploy: "direct", firmware: hardware.Redfish, remoteBMC: true, drive: hb,
			req: func(uuid string) any {
				return provision.Request{NodeUUID: uuid, Verb: provision.VerbActive, FromState: provision.Available,
					DeploySteps: json.RawMessage(`[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[{"component":"bmc","url":"http://images.example/bmc.bin"}]}}]`)}
			}},
		// bios.apply_configuration as a deploy step while the agent runs: it
		// reboots into the agent and waits for its second call-back.
		{name: "deploy-bios-step-under-agent", wf: workflows.WorkflowDeployNode, deploy: "direct", bios: hardware.Redfish,
			drive: both(hb, func(c client.Client, id string) { time.Sleep(2 * time.Second); hb(c, id) }),
			req: func(uuid string) any {
				return provision.Request{NodeUUID: uuid, Verb: provision.VerbActive, FromState: provision.Available,
					DeploySteps: json.RawMessage(`[{"interface":"bios","step":"apply_configuration","priority":90,"args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`)}
			}},
		{name: "deploy-callback-timeout", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy},
		{name: "deploy-abort-in-wait", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy, drive: signalAfter(time.Second, workflows.SignalAbort)},
		{name: "deploy-write-fails-retry", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy,
			fails: map[string]int{"deploy.write_image": 1}, drive: both(hb, signalAfter(time.Second, workflows.SignalRetry))},
		// A failed step waits for the operator, who aborts.
		{name: "deploy-write-fails-abort", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy,
			fails: map[string]int{"deploy.write_image": 1}, drive: both(hb, signalAfter(2*time.Second, workflows.SignalAbort))},
		// A failed step waits for the operator; `baremetal node undeploy`
		// ends the wait (the API's abort names the verb).
		{name: "deploy-write-fails-undeploy", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy,
			fails: map[string]int{"deploy.write_image": 1}, drive: both(hb, func(c client.Client, id string) {
				time.Sleep(2 * time.Second)
				must(c.SignalWorkflow(ctx, id, "", workflows.SignalAbort, provision.AbortRequest{SupersededBy: provision.VerbDeleted}))
			})},
		// The agent stops heartbeating while it writes the image: the
		// liveness timer fires, the write is cancelled, the node is cleaned
		// up and fails.
		{name: "deploy-agent-lost-mid-write", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy, drive: hb,
			hangs: []string{"deploy.write_image"}, policy: func(p *workflows.Policy) { p.HeartbeatTimeout = 2 * time.Second }},
		{name: "deploy-bootloader-fails-skip", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy,
			fails: map[string]int{"deploy.prepare_instance_boot": 1}, drive: both(hb, signalAfter(time.Second, workflows.SignalSkipStep))},
		{name: "deploy-boot-device-fails-gives-up", wf: workflows.WorkflowDeployNode, deploy: "direct", req: deploy,
			fails: map[string]int{"SetBootDevice disk": 1}, drive: hb},
		{name: "deploy-ramdisk", wf: workflows.WorkflowDeployNode, deploy: "ramdisk", req: deploy},
		{name: "deploy-fake", wf: workflows.WorkflowDeployNode, deploy: "fake", req: deploy},
		{name: "deploy-anaconda", wf: workflows.WorkflowDeployNode, deploy: "anaconda", req: deploy, drive: func(c client.Client, id string) {
			time.Sleep(500 * time.Millisecond)
			must(c.SignalWorkflow(ctx, id, "", workflows.SignalHeartbeat, signed(id, workflows.Heartbeat{AgentStatus: workflows.AgentStatusStart, AgentStatusMessage: "pre"})))
			must(c.SignalWorkflow(ctx, id, "", workflows.SignalHeartbeat, signed(id, workflows.Heartbeat{AgentStatus: workflows.AgentStatusEnd, AgentStatusMessage: "done"})))
		}},
		{name: "undeploy-cleans", wf: workflows.WorkflowUndeployNode, deploy: "direct", req: prov(provision.VerbDeleted, provision.Active), drive: hb},
		// A node with disable_power_off: the power stays on, a reset ends
		// the instance (change undeploy-0.2).
		{name: "undeploy-disable-power-off", wf: workflows.WorkflowUndeployNode, deploy: "direct", disablePowerOff: true, req: prov(provision.VerbDeleted, provision.Active), drive: hb},
		{name: "provide-cleans", wf: workflows.WorkflowProvideNode, deploy: "direct", req: prov(provision.VerbProvide, provision.Manageable), drive: hb},
		{name: "provide-clean-step-fails-gives-up", wf: workflows.WorkflowProvideNode, deploy: "direct", req: prov(provision.VerbProvide, provision.Manageable),
			fails: map[string]int{"deploy.erase_devices_metadata": 1}, drive: hb},
		{name: "manage-enroll", wf: workflows.WorkflowManageNode, deploy: "direct", req: prov(provision.VerbManage, provision.Enroll)},
		{name: "inspect-agent", wf: workflows.WorkflowInspectNode, deploy: "direct", req: prov(provision.VerbInspect, provision.Manageable), drive: hb},
		// Out-of-band inspection: the BMC (Redfish) answers, nothing boots.
		{name: "inspect-redfish", wf: workflows.WorkflowInspectNode, deploy: "direct", inspect: hardware.Redfish, req: prov(provision.VerbInspect, provision.Manageable)},
		{name: "rescue-agent", wf: workflows.WorkflowRescueNode, deploy: "direct", rescue: "agent", req: prov(provision.VerbRescue, provision.Active), drive: hb},
		{name: "rescue-abort-in-wait", wf: workflows.WorkflowRescueNode, deploy: "direct", rescue: "agent", req: prov(provision.VerbRescue, provision.Active),
			drive: signalAfter(time.Second, workflows.SignalAbort)},
		{name: "rescue-finalize-fails-retry", wf: workflows.WorkflowRescueNode, deploy: "direct", rescue: "agent", req: prov(provision.VerbRescue, provision.Active),
			fails: map[string]int{"FinalizeRescue": 1}, drive: both(hb, signalAfter(time.Second, workflows.SignalRetry))},
		{name: "rescue-fake", wf: workflows.WorkflowRescueNode, deploy: "fake", rescue: "fake", req: prov(provision.VerbRescue, provision.Active)},
		{name: "unrescue-agent", wf: workflows.WorkflowUnrescueNode, deploy: "direct", rescue: "agent", req: prov(provision.VerbUnrescue, provision.Rescue)},
		// Adoption (API 1.17): a node that validates, and one whose
		// validation fails (adopt failed).
		{name: "adopt", wf: workflows.WorkflowAdoptNode, deploy: "direct", req: prov(provision.VerbAdopt, provision.Manageable)},
		{name: "adopt-validation-fails", wf: workflows.WorkflowAdoptNode, deploy: "ramdisk", req: prov(provision.VerbAdopt, provision.Manageable),
			fails: map[string]int{"ValidateAdoption": 1}},
		// Manual cleaning: the agent's step, an interface's step without
		// the agent, a failed step the operator aborts, and abort of a
		// running abortable step.
		{name: "clean-manual", wf: workflows.WorkflowCleanNode, deploy: "direct", req: cleanReq(`[{"interface":"deploy","step":"erase_devices_metadata"}]`, false), drive: hb},
		{name: "clean-manual-disable-ramdisk", wf: workflows.WorkflowCleanNode, deploy: "direct", req: cleanReq(`[{"interface":"bios","step":"factory_reset"}]`, true)},
		{name: "clean-manual-step-fails-abort", wf: workflows.WorkflowCleanNode, deploy: "direct", req: cleanReq(`[{"interface":"deploy","step":"erase_devices"}]`, false),
			fails: map[string]int{"deploy.erase_devices": 1}, drive: both(hb, signalAfter(2*time.Second, workflows.SignalAbort))},
		// The machine reboots under a step: it runs again from its
		// checkpoint.
		// A reboot-requesting step: reboot into the agent, wait for its
		// second call-back, then the next step.
		{name: "clean-manual-reboot-requested-step", wf: workflows.WorkflowCleanNode, deploy: "direct",
			req:   cleanReq(`[{"interface":"deploy","step":"apply_firmware"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false),
			drive: both(hb, func(c client.Client, id string) { time.Sleep(2 * time.Second); hb(c, id) })},
		{name: "clean-manual-agent-lost-command-resumes", wf: workflows.WorkflowCleanNode, deploy: "direct",
			req: cleanReq(`[{"interface":"deploy","step":"erase_devices"}]`, false), lost: []string{"deploy.erase_devices"}, drive: hb},
		// Servicing an active node: the agent's step and the instance's
		// boot, an interface's step without the agent, a failed step the
		// operator retries, and one the operator aborts (back to active).
		// Manual cleaning of a redfish-bios node caches its BIOS settings
		// first.
		{name: "clean-manual-redfish-bios", wf: workflows.WorkflowCleanNode, deploy: "direct", bios: hardware.Redfish,
			req: cleanReq(`[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`, true)},
		// A redfish bios step while the agent is up reboots into the agent
		// and waits for its second call-back before the next step.
		{name: "clean-manual-redfish-bios-under-agent", wf: workflows.WorkflowCleanNode, deploy: "direct", bios: hardware.Redfish,
			req:   cleanReq(`[{"interface":"bios","step":"factory_reset"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false),
			drive: both(hb, func(c client.Client, id string) { time.Sleep(2 * time.Second); hb(c, id) })},
		// A firmware image applied at the host's reset while the agent runs:
		// the reboot goes into the agent, whose second call-back the plan
		// waits for.
		{name: "clean-manual-firmware-update-under-agent", wf: workflows.WorkflowCleanNode, deploy: "direct", firmware: hardware.Redfish, remoteBMC: true,
			req:   cleanReq(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images.example/bios.bin"}]}},{"interface":"deploy","step":"erase_devices_metadata"}]`, false),
			drive: both(hb, func(c client.Client, id string) { time.Sleep(3 * time.Second); hb(c, id) })},
		{name: "clean-manual-firmware-update", wf: workflows.WorkflowCleanNode, deploy: "direct", firmware: hardware.Redfish, remoteBMC: true,
			req: cleanReq(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images.example/bios.bin"}]}}]`, true)},
		{name: "service", wf: workflows.WorkflowServiceNode, deploy: "direct", req: serviceReq(`[{"interface":"deploy","step":"erase_pstore"}]`, false), drive: hb},
		{name: "service-disable-ramdisk", wf: workflows.WorkflowServiceNode, deploy: "direct", req: serviceReq(`[{"interface":"bios","step":"factory_reset"}]`, true)},
		// Servicing of a redfish-bios node caches its BIOS settings first.
		{name: "service-redfish-bios", wf: workflows.WorkflowServiceNode, deploy: "direct", bios: hardware.Redfish,
			req: serviceReq(`[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`, true)},
		{name: "service-step-fails-retry", wf: workflows.WorkflowServiceNode, deploy: "direct", req: serviceReq(`[{"interface":"deploy","step":"erase_pstore"}]`, false),
			fails: map[string]int{"deploy.erase_pstore": 1}, drive: both(hb, signalAfter(time.Second, workflows.SignalRetry))},
		{name: "service-step-fails-abort", wf: workflows.WorkflowServiceNode, deploy: "direct", req: serviceReq(`[{"interface":"deploy","step":"erase_pstore"}]`, false),
			fails: map[string]int{"deploy.erase_pstore": 1}, drive: both(hb, signalAfter(2*time.Second, workflows.SignalAbort))},
		{name: "power-on", wf: workflows.WorkflowSetPowerState, deploy: "direct", req: func(uuid string) any {
			return workflows.PowerRequest{NodeUUID: uuid, Target: "power on"}
		}},
		{name: "boot-device", wf: workflows.WorkflowChangeBootDevice, deploy: "direct", req: func(uuid string) any {
			return workflows.BootDeviceRequest{NodeUUID: uuid, BootDevice: "pxe"}
		}},
		{name: "vmedia-attach", wf: workflows.WorkflowChangeVirtualMedia, deploy: "direct", req: func(uuid string) any {
			return workflows.VirtualMediaRequest{NodeUUID: uuid, Attach: true, DeviceType: "cdrom", ImageURL: "http://images.example/boot.iso"}
		}},
		{name: "vmedia-detach", wf: workflows.WorkflowChangeVirtualMedia, deploy: "direct", req: func(uuid string) any {
			return workflows.VirtualMediaRequest{NodeUUID: uuid}
		}},
		{name: "vmedia-read", wf: workflows.WorkflowChangeVirtualMedia, deploy: "direct", req: func(uuid string) any {
			return workflows.VirtualMediaRequest{NodeUUID: uuid, Read: true}
		}},
		// API 1.29 and 1.63 (workflows/nodemanagement.go).
		{name: "management-inject-nmi", wf: workflows.WorkflowNodeManagement, deploy: "direct", req: func(uuid string) any {
			return workflows.ManagementRequest{NodeUUID: uuid, Action: workflows.ManagementInjectNMI}
		}},
		{name: "management-read-indicators", wf: workflows.WorkflowNodeManagement, deploy: "direct", req: func(uuid string) any {
			return workflows.ManagementRequest{NodeUUID: uuid, Action: workflows.ManagementReadIndicators}
		}},
		{name: "management-set-indicator", wf: workflows.WorkflowNodeManagement, deploy: "direct", req: func(uuid string) any {
			return workflows.ManagementRequest{NodeUUID: uuid, Action: workflows.ManagementSetIndicator, Component: "system", Indicator: "led", State: "blinking"}
		}},
		// Hold steps: unhold goes on, abort fails.
		{name: "clean-hold-unhold", wf: workflows.WorkflowCleanNode, deploy: "direct",
			req:   cleanReq(`[{"interface":"deploy","step":"hold"},{"interface":"deploy","step":"wait","args":{"seconds":1}},{"interface":"power","step":"power_off"},{"interface":"power","step":"power_on"}]`, true),
			drive: signalAfter(time.Second, workflows.SignalUnhold)},
		{name: "service-hold-abort", wf: workflows.WorkflowServiceNode, deploy: "direct",
			req: serviceReq(`[{"interface":"deploy","step":"hold"}]`, true), drive: signalAfter(time.Second, workflows.SignalAbort)},
		{name: "deploy-hold-unhold", wf: workflows.WorkflowDeployNode, deploy: "direct", drive: both(hb, signalAfter(time.Second, workflows.SignalUnhold)), req: func(uuid string) any {
			return provision.Request{NodeUUID: uuid, Verb: provision.VerbActive, FromState: provision.Available,
				DeploySteps: json.RawMessage(`[{"interface":"deploy","step":"hold","priority":90}]`)}
		}},
		{name: "boot-mode", wf: workflows.WorkflowChangeBootMode, deploy: "direct", req: func(uuid string) any {
			return workflows.BootModeRequest{NodeUUID: uuid, BootMode: "uefi"}
		}},
		// Vendor passthru on the BMC: a method that returns, one that fails.
		{name: "vendor-passthru-create-subscription", wf: workflows.WorkflowVendorPassthru, deploy: "direct", remoteBMC: true, req: func(uuid string) any {
			return workflows.VendorPassthruRequest{NodeUUID: uuid, Method: hardware.VendorCreateSubscription, HTTPMethod: "POST",
				Args: map[string]any{"Destination": "https://events.example/metal3"}, SecretKey: "vendor_passthru_secret_0123456789abcdef"}
		}},
		{name: "vendor-passthru-delete-fails", wf: workflows.WorkflowVendorPassthru, deploy: "direct", remoteBMC: true,
			fails: map[string]int{"CallVendorMethod": 1}, req: func(uuid string) any {
				return workflows.VendorPassthruRequest{NodeUUID: uuid, Method: hardware.VendorDeleteSubscription, HTTPMethod: "DELETE", Args: map[string]any{"id": "7"}}
			}},
		{name: "console-enable", wf: workflows.WorkflowSetConsoleNode, deploy: "direct", req: func(uuid string) any {
			return workflows.ConsoleRequest{NodeUUID: uuid, Enabled: true}
		}},
		{name: "console-disable", wf: workflows.WorkflowSetConsoleNode, deploy: "direct", req: func(uuid string) any {
			return workflows.ConsoleRequest{NodeUUID: uuid, Enabled: false}
		}},
		{name: "allocate", wf: workflows.WorkflowAllocate, deploy: "direct", req: func(uuid string) any {
			return workflows.AllocationRequest{AllocationUUID: uuid}
		}},
		// A rollout of 5 nodes: a canary of one, waves of two, continue-as-new
		// after three starts, a budget of one failure (the last node fails).
		{name: "rollout", wf: workflows.WorkflowRollout, deploy: "direct", req: func(uuid string) any {
			return workflows.RolloutInput{Spec: workflows.RolloutSpec{UUID: uuid,
				Operation: map[string]any{"target": "deploy"},
				Selector:  workflows.RolloutSelector{Nodes: []string{"n1", "n2", "n3", "n4", "n9"}},
				Canary:    1, WaveSize: 2, MaxFailures: 1, OnBusy: workflows.RolloutOnBusySkip, ContinueAsNewAfter: 3}}
		}},
	}

	for i, s := range sc {
		uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		// A second argument records only the scenarios it prefixes, the
		// others keeping their node: a new workflow type's histories join
		// the release's without recording the release again.
		if len(os.Args) > 2 && !strings.HasPrefix(s.name, os.Args[2]) {
			continue
		}
		inspect := s.inspect
		if inspect == "" {
			inspect = hardware.Agent
		}
		s.node = workflows.NodeInfo{UUID: uuid, Driver: "fake-hardware", BootInterface: "ipxe", DeployInterface: hardware.Interface(s.deploy),
			InspectInterface: inspect, RescueInterface: hardware.Interface(s.rescue), BIOSInterface: hardware.Fake, BootMode: "bios", MACs: []string{"52:54:00:12:34:56"}, AutomatedClean: true, Policy: policy()}
		s.node.FirmwareInterface = s.firmware
		s.node.DisablePowerOff = s.disablePowerOff
		if s.bios != "" {
			s.node.BIOSInterface = s.bios
		}
		s.node.Policy.LocalBMC = !s.remoteBMC
		if s.policy != nil {
			s.policy(&s.node.Policy)
		}
		mu.Lock()
		nodes[uuid] = s
		failsLeft[uuid] = maps.Clone(s.fails)
		mu.Unlock()
		id := workflows.WorkflowID(uuid)
		req := s.req(uuid)
		if pr, ok := req.(provision.Request); ok && pr.Verb != "" {
			// As the API hands it: with the transition it decided.
			pr.Transition, _ = provision.Accept(pr.FromState, pr.Verb)
			req = pr
		}
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue,
			TypedSearchAttributes: workflows.SearchAttributes(uuid, "op", "state")}, s.wf, req)
		must(err)
		if s.drive != nil {
			go s.drive(c, id)
		}
		werr := run.Get(ctx, nil)
		file := filepath.Join(out, s.name+".json")
		cmd := exec.Command(temporalBin, "workflow", "show", "--address", srv.Address(), "-w", id, "-r", run.GetRunID(), "--output", "json")
		b, err := cmd.Output()
		must(err)
		must(os.WriteFile(file, compact(b), 0o644))
		fmt.Printf("%s: %s (workflow error: %v)\n", s.name, file, werr)
	}
	recordPowerSync(ctx, c, temporalBin, srv.Address(), out)
	recordReconcile(ctx, c, temporalBin, srv.Address(), out)
}

// recordReconcile records the first run of an eternal reconciler: a pass at
// start-up that repairs two nodes, one on the timer, then continue-as-new.
func recordReconcile(ctx context.Context, c client.Client, temporalBin, address, out string) {
	eternal := []struct {
		name, id, wf string
		in           any
	}{
		{name: "reconcile-continues-as-new", id: workflows.ReconcileWorkflowID(""), wf: workflows.WorkflowReconcile,
			in: workflows.ReconcileInput{Interval: 500 * time.Millisecond, IterationsPerRun: 2}},
	}
	for _, e := range eternal {
		recordContinuesAsNew(ctx, c, temporalBin, address, out, e.name, e.id, e.wf, e.in)
	}
}

// recordPowerSync records the first run of an eternal power sync: two
// ticks, then continue-as-new. The run's history ends there; the workflow
// itself goes on and is terminated.
func recordPowerSync(ctx context.Context, c client.Client, temporalBin, address, out string) {
	recordContinuesAsNew(ctx, c, temporalBin, address, out, "power-sync-continues-as-new", workflows.PowerSyncWorkflowID(""),
		workflows.WorkflowSyncPowerStates, workflows.SyncPowerInput{Interval: 500 * time.Millisecond, IterationsPerRun: 2})
}

// recordContinuesAsNew records the first run of an eternal workflow, up to
// its continue-as-new, and terminates the workflow.
func recordContinuesAsNew(ctx context.Context, c client.Client, temporalBin, address, out, name, id, wf string, in any) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, wf, in)
	must(err)
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, run.GetRunID())
		must(err)
		if d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("%s run %s did not continue as new: %v", wf, run.GetRunID(), d.WorkflowExecutionInfo.GetStatus())
		}
		time.Sleep(200 * time.Millisecond)
	}
	file := filepath.Join(out, name+".json")
	b, err := exec.Command(temporalBin, "workflow", "show", "--address", address, "-w", id, "-r", run.GetRunID(), "--output", "json").Output()
	must(err)
	must(os.WriteFile(file, compact(b), 0o644))
	must(c.TerminateWorkflow(ctx, id, "", "recorded"))
	fmt.Printf("%s: %s\n", name, file)
}

// compact drops the CLI's indentation: the files are read by the replayer.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	must(json.Compact(&buf, b))
	return buf.Bytes()
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
