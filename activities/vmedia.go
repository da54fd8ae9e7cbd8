package activities

import (
	"context"

	"github.com/ironflow/ironflow/workflows"
)

// AttachVirtualMedia inserts the image at in.ImageURL into the node's
// virtual CD through its BMC (API 1.89; the BMC fetches the URL itself).
func (a *Activities) AttachVirtualMedia(ctx context.Context, in workflows.VirtualMediaInput) error {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	return bmcErr(d.InsertMedia(ctx, in.ImageURL), "attach virtual media %s to node %s", in.DeviceType, in.Node.UUID)
}

// DetachVirtualMedia ejects the node's virtual media.
func (a *Activities) DetachVirtualMedia(ctx context.Context, in workflows.VirtualMediaInput) error {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	return bmcErr(d.EjectMedia(ctx), "detach virtual media from node %s", in.Node.UUID)
}
