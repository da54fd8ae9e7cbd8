package activities

import (
	"context"
	"fmt"

	"github.com/ironflow/ironflow/bmc"

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

// ReadVirtualMedia reads the node's virtual media devices from its BMC
// (API 1.93); a driver without virtual media is ErrTypeBMCUnsupported.
func (a *Activities) ReadVirtualMedia(ctx context.Context, in workflows.VirtualMediaInput) ([]workflows.VirtualMediaDevice, error) {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	r, ok := d.(bmc.MediaReader)
	if !ok {
		return nil, bmcErr(fmt.Errorf("%w: the driver reads no virtual media", bmc.ErrUnsupported), "read virtual media of node %s", in.Node.UUID)
	}
	devs, err := r.ReadMedia(ctx)
	if err != nil {
		return nil, bmcErr(err, "read virtual media of node %s", in.Node.UUID)
	}
	out := make([]workflows.VirtualMediaDevice, len(devs))
	for i, dv := range devs {
		out[i] = workflows.VirtualMediaDevice(dv)
	}
	return out, nil
}
