package workflows

// String forms of the provision states, for packages that hold a node's
// provision_state as the store's plain string (apiserver, bench, tests).
// Workflow code uses the State constants (Enroll, DeployWait, ...).
const (
	StateEnroll         = string(Enroll)
	StateVerifying      = string(Verifying)
	StateManageable     = string(Manageable)
	StateAvailable      = string(Available)
	StateActive         = string(Active)
	StateError          = string(Error)
	StateDeploying      = string(Deploying)
	StateDeployWait     = string(DeployWait)
	StateDeployFailed   = string(DeployFailed)
	StateDeleting       = string(Deleting)
	StateCleaning       = string(Cleaning)
	StateCleanWait      = string(CleanWait)
	StateCleanFailed    = string(CleanFailed)
	StateInspecting     = string(Inspecting)
	StateInspectWait    = string(InspectWait)
	StateInspectFailed  = string(InspectFailed)
	StateAdopting       = string(Adopting)
	StateAdoptFailed    = string(AdoptFailed)
	StateRescue         = string(Rescue)
	StateRescueFailed   = string(RescueFailed)
	StateRescueWait     = string(RescueWait)
	StateUnrescueFailed = string(UnrescueFailed)
	StateDeployHold     = string(DeployHold)
	StateCleanHold      = string(CleanHold)
)
