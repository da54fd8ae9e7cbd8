package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// unsupportedExtension is Ironic's UnsupportedDriverExtension message.
func unsupportedExtension(driver, extension string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("Driver %s does not support %s (disabled or not implemented).", driver, extension),
		workflows.ErrTypeBMCUnsupported, nil)
}

// SetBootMode sets the boot mode or the secure boot state through the BMC
// and returns what it reads back (ActSetBootMode). A type without a BMC
// to set it in (fake-hardware) keeps what was asked, as Ironic's fake
// management interface does.
func (a *Activities) SetBootMode(ctx context.Context, in workflows.BootModeInput) (workflows.BootModeResult, error) {
	var res workflows.BootModeResult
	if ht, ok := hardware.Lookup(in.Node.Driver); ok && ht.RecordsBootModeAsAsked() {
		res.BootMode, res.SecureBoot = in.BootMode, in.SecureBoot
		return res, nil
	}
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return res, err
	}
	defer d.Close()
	if in.BootMode != "" {
		bm, ok := d.(bmc.BootModeSetter)
		if !ok {
			return res, unsupportedExtension(in.Node.Driver, "set_boot_mode")
		}
		if err := bm.SetBootMode(ctx, bmc.BootMode(in.BootMode)); err != nil {
			return res, bmcErr(err, "set boot mode %s of node %s", in.BootMode, in.Node.UUID)
		}
		got, err := bm.BootMode(ctx)
		if err != nil {
			return res, bmcErr(err, "read back the boot mode of node %s", in.Node.UUID)
		}
		res.BootMode = string(got)
		if got == "" {
			res.BootMode = in.BootMode
		}
	}
	if in.SecureBoot != nil {
		sb, ok := d.(bmc.SecureBooter)
		if !ok {
			return res, unsupportedExtension(in.Node.Driver, "set_secure_boot_state")
		}
		if err := sb.SetSecureBoot(ctx, *in.SecureBoot); err != nil {
			return res, bmcErr(err, "set secure boot of node %s", in.Node.UUID)
		}
		on, err := sb.SecureBoot(ctx)
		if err != nil {
			return res, bmcErr(err, "read back the secure boot state of node %s", in.Node.UUID)
		}
		res.SecureBoot = &on
	}
	return res, nil
}

// RecordBootMode writes a boot mode change's result into the node
// (ActRecordBootMode, local): boot_mode and secure_boot as read back, or
// last_error. Local activity.
func (a *Activities) RecordBootMode(ctx context.Context, in workflows.BootModeRecord) error {
	_, err := a.Store.UpdateNode(ctx, in.NodeUUID, func(n *store.Node) error {
		if in.BootMode != "" {
			m := in.BootMode
			n.BootMode = &m
		}
		if in.SecureBoot != nil {
			v := *in.SecureBoot
			n.SecureBoot = &v
		}
		n.LastError = optional(in.LastError)
		return nil
	})
	if err != nil {
		return storeErr(err, "record the boot mode of node %s", in.NodeUUID)
	}
	return a.history(ctx, in.NodeUUID, in.Severity, "management", in.Event)
}
