package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// Virtual media attached through the API (API 1.89, Ironic's
// POST/DELETE /v1/nodes/{node}/vmedia): a short workflow that holds the
// node's lock while its BMC inserts or ejects the image, on the node's
// conductor-group hardware queue like every BMC call. The workflow and
// activity names are recorded in histories and never change.

const (
	// WorkflowChangeVirtualMedia is the name ChangeVirtualMedia is
	// registered and started under.
	WorkflowChangeVirtualMedia = "ChangeVirtualMedia"
	// ActAttachVirtualMedia inserts an image into the node's virtual
	// device through its BMC.
	ActAttachVirtualMedia = "AttachVirtualMedia"
	// ActDetachVirtualMedia ejects the node's virtual media.
	ActDetachVirtualMedia = "DetachVirtualMedia"
	// ActReadVirtualMedia reads the node's virtual media devices from its
	// BMC (API 1.93).
	ActReadVirtualMedia = "ReadVirtualMedia"
)

// VirtualMediaDevice is one virtual media device as the BMC reads it: GET
// /v1/nodes/{node}/vmedia's items (API 1.93).
type VirtualMediaDevice struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
	ImageName  string   `json:"image_name"`
}

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
	// Read (API 1.93) reads the devices instead: the workflow's result.
	// A read runs under its own workflow ID (VirtualMediaReadID), so that
	// it needs no node lock, as Ironic's read takes a shared one.
	Read bool `json:"read,omitempty"`
}

// VirtualMediaReadID is the workflow ID of a virtual media read: not the
// node lock (WorkflowID), so a read runs while the node's operation does.
func VirtualMediaReadID(nodeUUID string) string { return "vmedia-read-" + nodeUUID }

// VirtualMediaInput is the activity's input: the node and the request.
type VirtualMediaInput struct {
	Node       NodeInfo `json:"node"`
	DeviceType string   `json:"device_type,omitempty"`
	ImageURL   string   `json:"image_url,omitempty"`
}

// ChangeVirtualMedia attaches or detaches virtual media, or reads the
// devices (Read: the result; nil otherwise); the API waits for its result.
// A read is a request field no earlier request set, so histories of
// attach and detach replay as they ran.
func ChangeVirtualMedia(ctx workflow.Context, req VirtualMediaRequest) ([]VirtualMediaDevice, error) {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpVirtualMedia)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Read:
		var out []VirtualMediaDevice
		err := r.hw.call(ActReadVirtualMedia, VirtualMediaInput{Node: r.node}, &out)
		return out, err
	case req.Attach:
		return nil, r.hw.call(ActAttachVirtualMedia, VirtualMediaInput{Node: r.node, DeviceType: req.DeviceType, ImageURL: req.ImageURL}, nil)
	}
	return nil, r.hw.call(ActDetachVirtualMedia, VirtualMediaInput{Node: r.node}, nil)
}
