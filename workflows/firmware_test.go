package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// fakeBMCTasks answers the firmware activities: each component's task
// reports the states of script in turn (the last one repeats); "unreachable"
// is a BMC that does not answer.
type fakeBMCTasks struct {
	f       *fakeCloud
	scripts map[string][]string
	polls   map[string]int
	starts  int
	pollAt  []time.Time
	failMsg string
}

func (b *fakeBMCTasks) register(env *testsuite.TestWorkflowEnvironment) {
	b.polls = map[string]int{}
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(ctx context.Context, in FirmwareUpdateInput) (FirmwareTaskRef, error) {
		b.f.mu.Lock()
		b.starts++
		b.polls[in.Setting.Component] = 0
		b.f.mu.Unlock()
		if in.Index == 0 {
			b.f.showStep(&provision.RunningStep{Kind: in.Kind, Step: in.Step})
		}
		return FirmwareTaskRef{URI: "/redfish/v1/TaskService/Tasks/" + in.Setting.Component, Timeout: 30 * time.Minute, PollInterval: time.Minute},
			b.f.log(fmt.Sprintf("StartFirmwareUpdate %d %s %s", in.Index, in.Setting.Component, in.Setting.URL))
	}, ActStartFirmwareUpdate)
	reg(func(ctx context.Context, in FirmwareTaskInput) (FirmwareTaskState, error) {
		b.f.mu.Lock()
		script := b.scripts[in.Component]
		i := b.polls[in.Component]
		b.polls[in.Component]++
		b.pollAt = append(b.pollAt, env.Now())
		b.f.mu.Unlock()
		state := script[min(i, len(script)-1)]
		switch state {
		case "unreachable":
			return FirmwareTaskState{Unreachable: "BMC unreachable: connection refused"}, nil
		case "Exception":
			return FirmwareTaskState{State: state, Done: true, Failed: true, Messages: []string{b.failMsg}}, nil
		case "Completed":
			return FirmwareTaskState{State: state, Percent: 100, Done: true}, nil
		case "AwaitReset":
			return FirmwareTaskState{State: "Running", Percent: 100, ResetRequired: true, Messages: []string{"In order to complete the operation, a component reset is required"}}, nil
		}
		return FirmwareTaskState{State: state, Percent: 10 * i, Messages: []string{"Flashing the image"}}, nil
	}, ActPollFirmwareTask)
	reg(func(ctx context.Context, in FirmwareRecordInput) error { return b.f.log("RecordFirmware") }, ActRecordFirmware)
}

func firmwareCloud(scripts map[string][]string) (*fakeCloud, *fakeBMCTasks) {
	f := manualCleanCloud()
	f.node.FirmwareInterface = hardware.Redfish
	return f, &fakeBMCTasks{f: f, scripts: scripts}
}

const twoComponents = `[{"interface":"firmware","step":"update","args":{"settings":[
	{"component":"bios","url":"http://images/bios.bin"},{"component":"bmc","url":"http://images/bmc.bin","wait":30}]}}]`

// The update step starts each component's update, waits for its task by
// a timer loop (one short poll a minute), keeps waiting while the BMC does
// not answer (its reset after a bmc update), and reads the versions back.
func TestFirmwareUpdateWaitsForEachTaskThroughABMCReset(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{
		"bios": {"Running", "Running", "Completed"},
		"bmc":  {"Running", "unreachable", "unreachable", "unreachable", "Completed"},
	})
	env := newEnv(t, f)
	b.register(env)
	env.ExecuteWorkflow(CleanNode, cleanRequest(twoComponents, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{"RecordState cleaning",
		"StartFirmwareUpdate 0 bios http://images/bios.bin", "StartFirmwareUpdate 1 bmc http://images/bmc.bin",
		"RecordFirmware", "RecordState manageable"}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b.polls["bios"] != 3 || b.polls["bmc"] != 5 {
		t.Fatalf("polls = %v, want bios 3, bmc 5", b.polls)
	}
	for i := 1; i < len(b.pollAt); i++ {
		if gap := b.pollAt[i].Sub(b.pollAt[i-1]); gap < time.Minute {
			t.Fatalf("poll %d came %s after the one before, want the poll interval (1m) between them", i, gap)
		}
	}
	shown := strings.Join(f.cleanStepsShown(), "\n")
	if !strings.Contains(shown, "StartFirmwareUpdate 0 bios http://images/bios.bin → firmware.update") {
		t.Fatalf("clean_step after each call:\n%s", shown)
	}
}

// A task that ends in Exception fails the step with the BMC's message;
// the operator's retry runs the update again, which succeeds.
func TestFirmwareUpdateFailedTaskThenRetry(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{"bios": {"Running", "Exception"}})
	b.failMsg = "The installation of the image failed: signature verification failed."
	env := newEnv(t, f)
	b.register(env)
	var failed provision.State
	var failedErr string
	env.RegisterDelayedCallback(func() {
		failed, failedErr = lastState(f), f.lastErr
		b.scripts["bios"] = []string{"Completed"}
		env.SignalWorkflow(SignalRetry, nil)
	}, 20*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if failed != provision.CleanFailed || !strings.Contains(failedErr, "Clean failed at step firmware.update") ||
		!strings.Contains(failedErr, "ended Exception: "+b.failMsg) {
		t.Fatalf("while failed: %s with %q", failed, failedErr)
	}
	if lastState(f) != provision.Manageable || b.starts != 2 {
		t.Fatalf("ended in %s after %d starts, want manageable after 2", lastState(f), b.starts)
	}
}

// A task that never ends fails the step at the timeout, with the last
// state and messages the BMC gave.
func TestFirmwareUpdateStalledTaskFailsAtTheTimeout(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{"bios": {"Running"}})
	env := newEnv(t, f)
	b.register(env)
	var failed provision.State
	var failedErr string
	env.RegisterDelayedCallback(func() {
		failed, failedErr = lastState(f), f.lastErr
		env.SignalWorkflow(SignalAbort, nil)
	}, 40*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if failed != provision.CleanFailed || !strings.Contains(failedErr, "did not finish within 30m0s") ||
		!strings.Contains(failedErr, "last seen Running") || !strings.Contains(failedErr, "Flashing the image") {
		t.Fatalf("while failed: %s with %q", failed, failedErr)
	}
	if b.polls["bios"] < 29 || b.polls["bios"] > 31 {
		t.Fatalf("polled %d times in a 30m timeout at 1m intervals", b.polls["bios"])
	}
}

// Bad settings fail the step before anything is asked of the BMC, with
// Ironic's schema message.
func TestParseFirmwareSettings(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{`{"settings":[{"component":"bios","url":"http://x/b.bin","wait":5}]}`, ""},
		{`{"settings":[{"component":"nic:NIC.Integrated.1","url":"http://x/n.bin","checksum":"da39a3ee5e6b4b0d3255bfef95601890afd80709"}]}`, ""},
		{`{"settings":[{"component":"bios","url":"http://x/b.bin","checksum":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}]}`, ""},
		{`{"settings":[{"component":"bios","url":"http://x/b.bin","checksum":"abc"}]}`, `checksum "abc": not a SHA-1, SHA-256 or SHA-512 hex digest`},
		{`{"settings":[{"component":"bios","url":"http://x/b.bin","checksum":"sha256:zz"}]}`, `a sha256 digest is 64 hex digits`},
		{`{"settings":[{"component":"bios","url":"http://x/b.bin","checksum":"md5:d41d8cd98f00b204e9800998ecf8427e"}]}`, `not a SHA-1, SHA-256 or SHA-512`},
		{`{"settings":[{"component":"bios"}]}`, "'url' is a required property"},
		{`{"settings":[{"component":"bios","url":"u","color":"red"}]}`, "Additional properties are not allowed ('color' was unexpected)"},
		{`{"settings":[{"component":"cpld","url":"u"}]}`, `unknown component "cpld"`},
		{`{"settings":[{"component":"bios","url":"u","wait":0}]}`, "wait must be an integer of at least 1"},
		{`{"settings":"bios"}`, "settings must be a list of objects"},
	} {
		_, err := ParseFirmwareSettings([]byte(c.args))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err %v, want %q", c.args, err, c.want)
		}
	}
}

// Servicing runs the update step the same way: the active node's
// firmware is updated out of band and the node is active again.
func TestFirmwareUpdateInServicing(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{"bmc": {"Running", "unreachable", "Completed"}})
	f.node.ProvisionState = provision.Active
	env := newEnv(t, f)
	env.RegisterWorkflow(ServiceNode)
	b.register(env)
	env.ExecuteWorkflow(ServiceNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: provision.VerbService, FromState: provision.Active, DisableRamdisk: true,
		ServiceSteps: []byte(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bmc","url":"http://images/bmc.bin"}]}}]`)}))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "StartFirmwareUpdate 0 bmc http://images/bmc.bin\nRecordFirmware") || lastState(f) != provision.Active || b.polls["bmc"] != 3 {
		t.Fatalf("calls:\n%s\nended %s after %d polls", calls, lastState(f), b.polls["bmc"])
	}
}

// A BIOS the BMC applies at the host's reset: the step reboots the node
// once when the task says so, keeps polling, and ends when the task does.
func TestFirmwareUpdateRebootsWhenTheBMCWaitsForAReset(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{"bios": {"Running", "AwaitReset", "AwaitReset", "AwaitReset", "Completed"}})
	env := newEnv(t, f)
	b.register(env)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{"RecordState cleaning", "StartFirmwareUpdate 0 bios http://images/bios.bin", "SetPower rebooting", "RecordFirmware", "RecordState manageable"}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b.polls["bios"] != 5 {
		t.Fatalf("polls = %v, want 5", b.polls)
	}
}

// firmware.update is a deploy step too (Ironic's redfish firmware
// interface): named by deploy_steps (or a deploy template) with a priority
// above deploy.deploy's it runs through the BMC before the agent boots;
// below it, after the agent called back, in its priority order (change
// deploy-interface-steps). The deploy ends active.
func TestFirmwareUpdateAsADeployStep(t *testing.T) {
	const update = `{"interface":"firmware","step":"update","priority":%d,"args":{"settings":[{"component":"bmc","url":"http://images/bmc.bin"}]}}`
	for _, c := range []struct{ priority int }{{110}, {90}} {
		t.Run(fmt.Sprint(c.priority), func(t *testing.T) {
			f := newFakeCloud()
			f.node.FirmwareInterface = hardware.Redfish
			b := &fakeBMCTasks{f: f, scripts: map[string][]string{"bmc": {"Running", "Completed"}}}
			env := newEnv(t, f)
			b.register(env)
			heartbeatAfter(env, 2*time.Minute)
			req := deployRequest()
			req.DeploySteps = []byte("[" + fmt.Sprintf(update, c.priority) + "]")
			env.ExecuteWorkflow(DeployNode, req)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
			}
			requireActive(t, f)
			calls := f.callList()
			start := slices.Index(calls, "StartFirmwareUpdate 0 bmc http://images/bmc.bin")
			boot := slices.Index(calls, "PrepareBoot agent")
			write := slices.Index(calls, "RunAgentStep deploy.write_image @"+agentURL)
			if start < 1 || boot < 0 || write < 0 || calls[start+1] != "RecordFirmware" {
				t.Fatalf("no firmware update in the deploy: %v", calls)
			}
			if c.priority > 100 && !(start < boot) || c.priority < 100 && !(boot < start && start < write) {
				t.Fatalf("priority %d: update at call %d, agent boot at %d, write_image at %d: %v", c.priority, start, boot, write, calls)
			}
			if calls[start-1] != "RecordState deploying" || calls[start+2] != "RecordState deploying" {
				t.Fatalf("the update's start and end are not in the node's history: %v", calls)
			}
			found := false
			for _, e := range f.events {
				found = found || strings.Contains(e, fmt.Sprintf("Running deploy step firmware.update (priority %d) out of band", c.priority))
			}
			if !found {
				t.Fatalf("no history event for the out-of-band deploy step in %q", f.events)
			}
		})
	}
}

// The API's check (CheckDeploySteps) accepts firmware.update for a redfish
// firmware interface and refuses it elsewhere (skipped before the agent's
// steps are known is only for steps the agent may have: the firmware
// interface's are known), and refuses malformed components.
func TestCheckDeployStepsFirmwareUpdate(t *testing.T) {
	good, _ := ParseUserSteps([]byte(`[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}]`))
	bad, _ := ParseUserSteps([]byte(`[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[]}}]`))
	redfish := map[string]hardware.Interface{"firmware": hardware.Redfish}
	if err := CheckDeploySteps(good, nil, redfish); err != nil {
		t.Fatalf("redfish firmware: %v", err)
	}
	if err := CheckDeploySteps(bad, nil, redfish); err == nil {
		t.Fatal("an update without components was accepted")
	}
	missing, _ := ParseUserSteps([]byte(`[{"interface":"firmware","step":"update","priority":110}]`))
	if err := CheckDeploySteps(missing, nil, redfish); err == nil || !strings.Contains(err.Error(), "missing these required arguments: settings") {
		t.Fatalf("an update without args: %v", err)
	}
}

// A firmware image the BMC applies at the host's reset, flashed while the
// agent runs on the node: the reboot goes into the agent (token removed,
// its boot prepared again, next boot pointed at it) and the next in-band
// step runs only after the agent called back from that boot (change
// firmware-reboot-into-agent), in cleaning and in a deploy.
func TestFirmwareUpdateUnderTheAgentRebootsIntoIt(t *testing.T) {
	const update = `{"interface":"firmware","step":"update"%s,"args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}`
	for _, c := range []struct {
		name, next string
		deploy     bool
	}{
		{name: "cleaning", next: "deploy.erase_devices_metadata"},
		{name: "deploy", next: "deploy.write_image", deploy: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, b := firmwareCloud(map[string][]string{"bios": {"Running", "AwaitReset", "AwaitReset", "Completed"}})
			req := cleanRequest("["+fmt.Sprintf(update, "")+`,{"interface":"deploy","step":"erase_devices_metadata"}]`, false)
			wf, active, wait := any(CleanNode), provision.Cleaning, provision.CleanWait
			if c.deploy {
				f.node.ProvisionState = provision.Available
				req = deployRequest()
				req.DeploySteps = []byte("[" + fmt.Sprintf(update, `,"priority":90`) + "]")
				wf, active, wait = DeployNode, provision.Deploying, provision.DeployWait
			}
			env := newEnv(t, f)
			b.register(env)
			start := env.Now()
			var nextAt time.Time
			f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
				if in.Step.Name() == c.next {
					nextAt = env.Now()
				}
				return AgentStepResult{Status: "SUCCEEDED"}, nil
			}
			heartbeatAfter(env, time.Minute)
			heartbeatAfter(env, 20*time.Minute) // the call-back after the firmware's reboot
			env.ExecuteWorkflow(wf, req)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete cleanly: %v (last_error %q)", env.GetWorkflowError(), f.lastErr)
			}
			calls := f.callList()
			i := slices.Index(calls, "StartFirmwareUpdate 0 bios http://images/bios.bin")
			want := []string{"StartFirmwareUpdate 0 bios http://images/bios.bin",
				"RecordState " + string(active), "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting",
				"RecordFirmware", "RecordState " + string(wait), "RecordState " + string(active)}
			if c.deploy {
				want = append(want, "RecordState "+string(active)) // "Deploy step firmware.update finished"
			}
			if i < 0 || len(calls) < i+len(want) || strings.Join(calls[i:i+len(want)], "\n") != strings.Join(want, "\n") {
				t.Fatalf("calls from the update on:\n%s\nwant:\n%s", strings.Join(calls[max(i, 0):], "\n"), strings.Join(want, "\n"))
			}
			if nextAt.IsZero() || nextAt.Sub(start) < 20*time.Minute {
				t.Fatalf("step %s ran %s after the start, before the agent's call-back at 20m", c.next, nextAt.Sub(start))
			}
			if !slices.Contains(f.clearedAgent, active) {
				t.Fatalf("states recorded with the agent token removed: %v", f.clearedAgent)
			}
		})
	}
}

// Without the agent's call-back after the firmware's reboot the wait
// times out: clean failed naming the step, the next step never runs.
func TestFirmwareUpdateUnderTheAgentFailsWhenTheAgentDoesNotReturn(t *testing.T) {
	f, b := firmwareCloud(map[string][]string{"bios": {"AwaitReset", "Completed"}})
	env := newEnv(t, f)
	b.register(env)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}},{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	for _, call := range f.callList() {
		if strings.Contains(call, "erase_devices_metadata") {
			t.Fatalf("the next step ran without the agent's call-back: %v", f.callList())
		}
	}
	if !slices.Contains(f.states, provision.CleanFailed) ||
		!strings.Contains(f.lastErr, "wait call-back after firmware.update: Timeout reached while waiting for callback for node "+f.node.UUID) {
		t.Fatalf("states %v, last_error %q: want clean failed on the callback timeout after the update", f.states, f.lastErr)
	}
}
