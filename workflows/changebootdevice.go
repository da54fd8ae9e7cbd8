package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// ChangeBootDevice sets the boot device asked through the API; the API waits
// for its result.
func ChangeBootDevice(ctx workflow.Context, req BootDeviceRequest) error {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpBootDevice)
	if err != nil {
		return err
	}
	return r.hw.bootDevice(req.BootDevice, req.Persistent)
}
