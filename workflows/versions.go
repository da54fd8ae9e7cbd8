package workflows

// Change IDs of workflow.GetVersion, one per change to the commands a
// workflow records (docs/versioning.md). A workflow that started before a
// change replays its history on the new worker only if the change is behind
// its gate, the old path kept:
//
//	if workflow.GetVersion(ctx, changeXxx, workflow.DefaultVersion, 1) == 1 {
//		// the new path
//	} else {
//		// the old path, as it was
//	}
//
// Every ID is declared here, never as a literal at the call, so that the
// list is in one place: TestEveryChangeIDHasARecordedHistory checks that
// each one appears in a recorded history (workflows/testdata/history), and
// that no GetVersion call in the package uses a literal. A gate is removed
// only when no workflow that started before it can still be running
// (docs/versioning.md, "Removing a gate"). Never reuse or rename an ID.
const (
	// changeVerifyHeartbeatSignal: heartbeat signals are checked by the
	// local activity VerifySignal before the workflow trusts them (one
	// marker per heartbeat); taken at the first heartbeat. Introduced by
	// 55c27b0 (issue 16, signed heartbeats); histories before it:
	// testdata/history/c993240 and 0aaab4f, after it: cb74509 on.
	changeVerifyHeartbeatSignal = "verify-heartbeat-signal"
	// changeRefuseReplayedHeartbeat: a signed heartbeat whose nonce the
	// run already accepted (or older than the ones it forgot) is ignored
	// (signalLedger, workflow state only); taken at the first heartbeat,
	// right after changeVerifyHeartbeatSignal. Introduced by issue 16's
	// replay refusal; no recorded history has its new path yet: record
	// this version's histories (make record-histories).
	changeRefuseReplayedHeartbeat = "refuse-replayed-heartbeat"
	// changeResumeAgentStepAfterReboot: an in-band step whose command the
	// agent lost (RunAgentStep's AgentCommandLost: the machine rebooted
	// under it) is recorded (one RecordState) and run again with its last
	// checkpoint as the "checkpoint" argument, instead of failing; taken
	// only when such an error arrives (agentprogress.go). Introduced by
	// issue 18's burn-in resume; no recorded history has it yet: record
	// this version's histories (make record-histories).
	changeResumeAgentStepAfterReboot = "resume-agent-step-after-reboot"
	// changeDeployAgentSteps: the direct deploy checks its user and
	// deploy-template steps before it boots the agent, asks the agent for
	// its deploy steps (GetAgentSteps) once it called back, merges them
	// with the built-in plan (MergeSteps, deploy mode) and records the
	// plan and the running step's index (RecordStepPlan, deploy_steps and
	// deploy_step_index); taken where the direct deploy plans its steps
	// (DeployNode). Introduced by issue 18 (deploy steps from the agent);
	// no recorded history has its new path yet: record this version's
	// histories (make record-histories).
	changeDeployAgentSteps = "deploy-agent-steps"
	// changeFlowSteps: Ironic's reserved steps (hold, wait, power_on,
	// power_off, reboot; workflows/hold.go) run in clean, service and
	// deploy plans; before it a manual plan refused them and a deploy
	// plan sent them to the agent. Taken only by a plan that names a
	// reserved step (at the plan's merge, or at the deploy step). Introduced
	// by issue 18's hold steps (API 1.85 unhold); no recorded history has
	// its new path yet: record this version's histories (make
	// record-histories).
	changeFlowSteps = "flow-steps"
	// changeCacheBIOSSettings: ManageNode (after the power-state read) and
	// automated cleaning (before the agent boots) cache the BIOS settings
	// of a node whose bios interface is redfish (ActCacheBIOSSettings,
	// workflows/bios.go). Its marker was recorded for every node until
	// the release after issue 21's histories (634c8f6); since then it is
	// asked only for a redfish bios interface (docs/versioning.md, "Asking
	// a gate only where it changes something"). Introduced by issue 19's
	// BIOS settings.
	changeCacheBIOSSettings = "cache-bios-settings"
	// changeFirmwareTaskWait: the firmware interface's update step runs
	// as workflows/firmware.go's start activity, a timer loop polling the
	// BMC's task and a read-back of the versions, instead of one
	// ActRunInterfaceStep (which refused it: no firmware interface had a
	// step before). Taken only by plans that contain firmware.update.
	// Introduced by issue 19 (firmware updates); no recorded history has
	// its new path yet: record this version's histories.
	changeFirmwareTaskWait = "firmware-task-wait"
	// changeRebootRequestedStep: after an in-band step that declares
	// reboot_requested, the agent token is removed, the machine reboots
	// into the agent and the plan waits for its call-back before it goes
	// on (rebootstep.go), as Ironic's conductor does; taken only after such
	// a step. Introduced by issue 18's step engine; record this version's
	// histories (make record-histories).
	changeRebootRequestedStep = "reboot-requested-step"
	// changeDeploySecureBoot: an instance that asks for secure boot
	// (capability secure_boot:true) has it turned on through the BMC in
	// deploy.prepare_instance_boot, after the boot device, and off in the
	// teardown after its boot config is removed (ActSetBootMode, then
	// ActRecordBootMode; workflows/secureboot.go). Its marker was recorded
	// by every agent deploy and every teardown until the release after
	// 634c8f6; since then it is asked only for an instance that asks for
	// secure boot (an agent deploy takes it with changeAgentDeployBaseline).
	// Introduced by issue 19 (secure boot end to end).
	changeDeploySecureBoot = "deploy-secure-boot"
	// changeNetbootDeploySecureBoot: the ramdisk and anaconda deploys turn
	// secure boot on for an instance that asks for it, as the agent deploy
	// does (Ironic's ramdisk and anaconda deploys call
	// configure_secure_boot_if_needed): ramdisk before the instance's
	// ramdisk is prepared and booted, anaconda after the installer's boot
	// config is removed and before the installed system boots from disk
	// (workflows/secureboot.go). Its marker was recorded by every ramdisk
	// and anaconda deploy until the release after 634c8f6; since then it
	// is asked only for an instance that asks for secure boot. Introduced
	// by issue 19 (secure boot for every deploy interface).
	changeNetbootDeploySecureBoot = "netboot-deploy-secure-boot"
	// changeFirmwareRebootOnReset: a firmware task that reports it waits
	// for the host's reset (FirmwareTaskState.ResetRequired: a BIOS image
	// the BMC applies at reboot) makes the update step reboot the node
	// once (ActSetPower rebooting) and keep polling; before it the step
	// waited for the task until its timeout. Taken only when such a poll
	// result arrives (workflows/firmware.go). Introduced by issue 19
	// (reboot after a BIOS update); no recorded history has it yet:
	// record this version's histories (make record-histories).
	changeFirmwareRebootOnReset = "firmware-reboot-on-reset"
	// changeCacheBIOSManualClean: manual cleaning of a node whose bios
	// interface is redfish refreshes its cached BIOS settings when it
	// starts (CacheBIOSSettings), as Ironic's do_node_clean does for manual
	// and automated cleaning (bios.go cacheBIOSManual); asked only for such
	// a node. Introduced by issue 19; record this version's histories.
	changeCacheBIOSManualClean = "cache-bios-settings-manual-clean"
	// changeCacheBIOSService: servicing of a node whose bios interface is
	// redfish refreshes its cached BIOS settings when it starts, before the
	// agent boots (CacheBIOSSettings; bios.go cacheBIOSService); asked only
	// for such a node. Introduced by issue 19; record this version's
	// histories (make record-histories).
	changeCacheBIOSService = "cache-bios-settings-service"
	// changeBIOSStepWaitsForAgent: a redfish bios step (apply_configuration,
	// factory_reset) that runs while the agent is up removes the agent's
	// token, prepares the agent's boot (ActPrepareBoot), reboots into it
	// (InterfaceStepInput.RebootInto) and waits for the agent's call-back
	// before the plan goes on (bios.go biosStepWithAgent); before it the
	// step rebooted the machine into whatever it booted and the next
	// in-band step found no agent. Asked only for such a step. Introduced
	// by issue 19; record this version's histories (make record-histories).
	changeBIOSStepWaitsForAgent = "bios-step-waits-for-agent"
	// changeDeployInterfaceSteps: a direct deploy whose deploy_steps (the
	// request's or its deploy templates') name an interface's deploy step
	// (firmware.update of a redfish firmware interface, bios.apply_configuration
	// and bios.factory_reset, as Ironic's) runs it through the BMC at its
	// priority, before deploy.deploy when above it (deploy_steps.go
	// deployOutOfBandSteps); before it the step was
	// refused once the agent had reported its steps. Asked only for such a
	// deploy. Introduced by issue 19; record this version's histories (make
	// record-histories).
	changeDeployInterfaceSteps = "deploy-interface-steps"
	// changeFirmwareRebootIntoAgent: a firmware update whose task waits
	// for the host's reset while the agent runs on the node (a manual
	// cleaning or servicing without disable_ramdisk, a deploy step between
	// deploy.deploy and tear_down_agent) removes the agent's token,
	// prepares the agent's boot and reboots into it, and the plan waits
	// for the agent's call-back after the step (firmware.go firmwareStep);
	// before it the reboot booted whatever the machine booted. Asked only
	// at such a reboot. Introduced by issue 19; record this version's
	// histories (make record-histories).
	changeFirmwareRebootIntoAgent = "firmware-reboot-into-agent"
	// changeAgentDeployBaseline: an agent deploy (deploy_interface direct)
	// asks this one gate instead of the four every such deploy used to ask
	// one by one (changeDeployAgentSteps, changeVerifyHeartbeatSignal,
	// changeRefuseReplayedHeartbeat, changeDeploySecureBoot): version 1 takes
	// their new paths without their own GetVersion. Each GetVersion records
	// a marker and the SDK's TemporalChangeVersion search-attribute upsert
	// (a visibility write on the server); one gate instead of four saves a
	// deploy six history events and three visibility updates. A deploy
	// whose history has no marker of it asks the four as before. See
	// deploy.go agentDeployBaseline. Introduced by issue 21; record this
	// version's histories (make record-histories).
	//
	// Version 2 (deploy.go agentDeployPlanInState) also takes the same paths, with
	// four step plan writes folded into the writes next to them
	// (deploy_steps.go): the plan before the agent boots with the index of
	// its first step, the agent's plan with the state that announces it
	// and the index of the step after deploy.deploy, its clearing with
	// active. Four local activities fewer per agent deploy (22 to 18).
	// Introduced by issue 21 after the histories of 451188d.
	//
	// Version 3 (deploy.go agentDeployIndexWithStep) also has the first
	// activity of deploy.prepare_instance_boot, deploy.tear_down_agent and
	// deploy.boot_instance write the plan's index with the step
	// (RunningStep.Index), instead of a RecordStepPlan each: 15 local
	// activities. Introduced by issue 21 after the histories of ec8bd9d.
	//
	// Version 4 (deploy.go agentDeployOneTimer) also gives the callback
	// wait and the agent steps one timer, armed again rather than
	// cancelled (run.go waitCallbackOneTimer): one TimerStarted where
	// version 3 recorded two and a TimerCanceled. Introduced by issue 21
	// after the histories of 3dfd3b7; recorded in 3c5e3fb, and with the
	// later-wait rule (run.livenessAt) in fbbe02a.
	changeAgentDeployBaseline = "agent-deploy-baseline"
)
