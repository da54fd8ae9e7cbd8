package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// Vendor passthru (API 1.1, Ironic's /v1/nodes/{node}/vendor_passthru): a
// method of the node's vendor interface that reaches its BMC (the redfish
// vendor interface's event subscriptions and eject_vmedia,
// hardware/vendor.go) runs as one activity on the node's conductor-group
// queue, in a short workflow the API waits for. A method that takes
// Ironic's exclusive lock runs as the node lock (WorkflowID), so that a
// node another operation holds is 409 NodeLocked. The workflow and activity
// names are recorded in histories and never change.

const (
	// WorkflowVendorPassthru is the name VendorPassthru is registered and
	// started under.
	WorkflowVendorPassthru = "VendorPassthru"
	// ActCallVendorMethod runs a vendor method on the node's BMC.
	ActCallVendorMethod = "CallVendorMethod"
)

// Error types of a vendor method the API answers with Ironic's status:
// the arguments were refused once the BMC was asked (400, Ironic's
// InvalidParameterValue), the subscription is not there (404, Ironic's
// RedfishError of delete_subscription) or the BMC failed (500, Ironic's
// RedfishError).
const (
	ErrTypeVendorInvalid  = "VendorPassthruInvalid"
	ErrTypeVendorNotFound = "VendorPassthruNotFound"
	ErrTypeVendorFailed   = "VendorPassthruFailed"
)

// VendorPassthruRequest is a vendor method call asked through the API. Args
// are the method's arguments without their secrets: a secret argument
// (create_subscription's HttpHeaders) waits for the activity in the node's
// driver_internal_info under SecretKey, which the activity removes, so that
// it never enters workflow history.
type VendorPassthruRequest struct {
	NodeUUID       string         `json:"node_uuid"`
	ConductorGroup string         `json:"conductor_group"`
	Method         string         `json:"method"`
	HTTPMethod     string         `json:"http_method"`
	Args           map[string]any `json:"args,omitempty"`
	SecretKey      string         `json:"secret_key,omitempty"`
}

// VendorPassthruReadID is the workflow ID of a vendor method that takes no
// exclusive lock: not the node lock, so it runs while the node's operation
// does.
func VendorPassthruReadID(nodeUUID string) string { return "vendor-passthru-" + nodeUUID }

// VendorMethodInput is the activity's input: the node and the call.
type VendorMethodInput struct {
	Node       NodeInfo       `json:"node"`
	Method     string         `json:"method"`
	HTTPMethod string         `json:"http_method"`
	Args       map[string]any `json:"args,omitempty"`
	SecretKey  string         `json:"secret_key,omitempty"`
}

// VendorPassthru runs the method on the node's BMC and returns what it
// returned (nil for a method that returns nothing).
func VendorPassthru(ctx workflow.Context, req VendorPassthruRequest) (any, error) {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpVendorPassthru)
	if err != nil {
		return nil, err
	}
	var out any
	err = r.hw.call(ActCallVendorMethod, VendorMethodInput{Node: r.node, Method: req.Method,
		HTTPMethod: req.HTTPMethod, Args: req.Args, SecretKey: req.SecretKey}, &out)
	return out, err
}
