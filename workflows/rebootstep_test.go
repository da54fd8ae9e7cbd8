package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// A step that declares reboot_requested: once it finishes, the agent token
// goes, the machine reboots into the agent, and the next step runs only
// after the agent called back from that boot (Ironic's reboot_to_finish_step).
func TestCleanNodeRebootsAfterARebootRequestingStep(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = append([]provision.Step{{StepID: provision.StepID{Interface: "deploy", Step: "apply_firmware"}, Abortable: true, RebootRequested: true}}, agentCleanSteps...)
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	heartbeatAfter(env, 20*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"apply_firmware"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{
		"RecordState cleaning", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting", "RecordState clean wait",
		"RecordState cleaning", "GetAgentSteps clean", "RecordState clean wait",
		"RunAgentStep deploy.apply_firmware @" + agentURL,
		"RecordState cleaning", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting", "RecordState clean wait", "RecordState cleaning",
		"RecordState cleaning", "RecordState clean wait",
		"RunAgentStep deploy.erase_devices_metadata @" + agentURL, "RecordState cleaning",
		"AgentPowerOff", "SetPower power off", "CleanBoot", "RecordState manageable",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(f.clearedAgent) == 0 || f.clearedAgent[0] != provision.Cleaning {
		t.Fatalf("states recorded with the agent token removed: %v, want cleaning first (the reboot)", f.clearedAgent)
	}
	found := false
	for _, e := range f.events {
		found = found || strings.Contains(e, "Step deploy.apply_firmware requested a reboot")
	}
	if !found {
		t.Fatalf("no history event for the requested reboot in %q", f.events)
	}
}

// Without a second call-back the reboot's wait times out: clean failed,
// the next step never runs.
func TestCleanNodeFailsWhenTheAgentDoesNotReturnAfterTheReboot(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = append([]provision.Step{{StepID: provision.StepID{Interface: "deploy", Step: "apply_firmware"}, Abortable: true, RebootRequested: true}}, agentCleanSteps...)
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"apply_firmware"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	for _, c := range f.callList() {
		if strings.Contains(c, "erase_devices_metadata") {
			t.Fatalf("the next step ran without the agent's call-back: %v", f.callList())
		}
	}
	failed := false
	for _, st := range f.states {
		failed = failed || st == provision.CleanFailed
	}
	if !failed || !strings.Contains(f.lastErr, "wait call-back after deploy.apply_firmware: Timeout reached while waiting for callback") {
		t.Fatalf("states %v, last_error %q: want clean failed on the reboot's callback timeout", f.states, f.lastErr)
	}
}
