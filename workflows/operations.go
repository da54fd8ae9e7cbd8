package workflows

import "github.com/ironflow/ironflow/provision"

// Workflow type names: the names the worker registers each workflow under
// and clients start it by. They are recorded in every workflow's history,
// so they never change. They are plain strings because the SDK takes a
// workflow's name as a string.
const (
	WorkflowManageNode       = "ManageNode"
	WorkflowProvideNode      = "ProvideNode"
	WorkflowDeployNode       = "DeployNode"
	WorkflowUndeployNode     = "UndeployNode"
	WorkflowInspectNode      = "InspectNode"
	WorkflowSetPowerState    = "SetPowerState"
	WorkflowChangeBootDevice = "ChangeBootDevice"
	WorkflowRescueNode       = "RescueNode"
	WorkflowUnrescueNode     = "UnrescueNode"
	// WorkflowSyncPowerStates is the name SyncPowerStates is registered and
	// started under.
	WorkflowSyncPowerStates = "SyncPowerStates"
	// WorkflowAdoptNode is AdoptNode's name (API 1.17, adopt).
	WorkflowAdoptNode = "AdoptNode"
)

// WorkflowFor is the workflow type an operation runs; ok is false for abort
// (a signal to the running workflow) and for operations without one.
func WorkflowFor(op provision.Operation) (name string, ok bool) {
	switch op {
	case provision.OpManage:
		return WorkflowManageNode, true
	case provision.OpProvide:
		return WorkflowProvideNode, true
	case provision.OpDeploy:
		return WorkflowDeployNode, true
	case provision.OpUndeploy:
		return WorkflowUndeployNode, true
	case provision.OpInspect:
		return WorkflowInspectNode, true
	case provision.OpPower:
		return WorkflowSetPowerState, true
	case provision.OpBootDevice:
		return WorkflowChangeBootDevice, true
	case provision.OpRescue:
		return WorkflowRescueNode, true
	case provision.OpUnrescue:
		return WorkflowUnrescueNode, true
	case provision.OpVirtualMedia:
		return WorkflowChangeVirtualMedia, true
	case provision.OpManagement:
		return WorkflowNodeManagement, true
	case provision.OpClean:
		return WorkflowCleanNode, true
	case provision.OpService:
		return WorkflowServiceNode, true
	case provision.OpVendorPassthru:
		return WorkflowVendorPassthru, true
	case provision.OpAdopt:
		return WorkflowAdoptNode, true
	}
	return "", false
}
