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
	// changeFirmwareTaskWait: the firmware interface's update step runs
	// as workflows/firmware.go's start activity, a timer loop polling the
	// BMC's task and a read-back of the versions, instead of one
	// ActRunInterfaceStep (which refused it: no firmware interface had a
	// step before). Taken only by plans that contain firmware.update.
	// Introduced by issue 19 (firmware updates); no recorded history has
	// its new path yet: record this version's histories.
	changeFirmwareTaskWait = "firmware-task-wait"
)
