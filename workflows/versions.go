package workflows

// Change IDs of workflow.GetVersion (docs/versioning.md). A workflow that
// started on the last release replays its history on a newer worker only if
// every change to the commands it records since that release is behind a
// gate, the release's path kept:
//
//	if workflow.GetVersion(ctx, changeDeployNext, workflow.DefaultVersion, 1) == 1 {
//		// the new path
//	} else {
//		// the path of the last release, as it was
//	}
//
// Gates are taken against the last release only: between two releases, all
// changes to one workflow type share one change ID named for the next
// release (changeDeployNext = "deploy-0.2"), its version raised by each
// change that needs a new branch. Every ID is declared here, never as a
// literal at the call: TestEveryGetVersionNamesADeclaredChangeID checks that
// no GetVersion call in the package uses a literal, and that the recorded
// histories carry no marker of a retired gate. A gate is removed after the
// next release that no longer needs it (docs/versioning.md, "Removing a
// gate"). Never reuse or rename an ID.
const (
	// changeUndeployNext: the changes to UndeployNode since 0.1.0.
	// Version 1: a node with disable_power_off (API 1.95), whose power off
	// left the machine running its instance, is rebooted once its boot
	// configuration is removed (Ironic's agent_base clean_up with the
	// flag). Asked only for such nodes.
	changeUndeployNext = "undeploy-0.2"
)
