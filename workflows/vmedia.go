package workflows

import "go.temporal.io/sdk/workflow"

// Virtual media attached through the API (API 1.89, Ironic's
// POST/DELETE /v1/nodes/{node}/vmedia): a short workflow that holds the
// node's lock while its BMC inserts or ejects the image, on the node's
// conductor-group hardware queue like every BMC call. The workflow and
// activity names are recorded in histories and never change.

// OpVirtualMedia is the operation of ChangeVirtualMedia.
const OpVirtualMedia Operation = "virtual media"

const (
	// WorkflowChangeVirtualMedia is the name ChangeVirtualMedia is
	// registered and started under.
	WorkflowChangeVirtualMedia = "ChangeVirtualMedia"
	// ActAttachVirtualMedia inserts an image into the node's virtual
	// device through its BMC.
	ActAttachVirtualMedia = "AttachVirtualMedia"
	// ActDetachVirtualMedia ejects the node's virtual media.
	ActDetachVirtualMedia = "DetachVirtualMedia"
)

// VirtualMediaRequest is a virtual media attach (Attach) or detach asked
// through the API. The image URL is the user's; it carries no secret of
// ironflow's.
type VirtualMediaRequest struct {
	NodeUUID       string   `json:"node_uuid"`
	Attach         bool     `json:"attach"`
	DeviceType     string   `json:"device_type,omitempty"`
	ImageURL       string   `json:"image_url,omitempty"`
	DeviceTypes    []string `json:"device_types,omitempty"`
	ConductorGroup string   `json:"conductor_group"`
}

// VirtualMediaInput is the activity's input: the node and the request.
type VirtualMediaInput struct {
	Node       NodeInfo `json:"node"`
	DeviceType string   `json:"device_type,omitempty"`
	ImageURL   string   `json:"image_url,omitempty"`
}

// ChangeVirtualMedia attaches or detaches virtual media; the API waits for
// its result.
func ChangeVirtualMedia(ctx workflow.Context, req VirtualMediaRequest) error {
	r, err := newRun(ctx, ProvisionRequest{NodeUUID: req.NodeUUID}, OpVirtualMedia)
	if err != nil {
		return err
	}
	if req.Attach {
		return r.hardware(ActAttachVirtualMedia, VirtualMediaInput{Node: r.node, DeviceType: req.DeviceType, ImageURL: req.ImageURL}, nil)
	}
	return r.hardware(ActDetachVirtualMedia, VirtualMediaInput{Node: r.node}, nil)
}
