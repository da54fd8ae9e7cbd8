package workflows

// String forms of the provision states, for packages that still hold a
// node's provision_state as a plain string (apiserver, bench, tests).
//
// Deprecated: use the State constants (Enroll, DeployWait, ...); these go
// once those packages hold State values.
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
