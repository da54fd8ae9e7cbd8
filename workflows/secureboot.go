package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Secure boot of an instance, as Ironic's boot_mode_utils does it
// (configure_secure_boot_if_needed and deconfigure_secure_boot_if_needed):
// when the instance asks for it (capability secure_boot:true in
// instance_info.capabilities, else properties.capabilities; NodeInfo
// SecureBoot), the deploy turns secure boot on through the BMC before the
// instance's first boot, and the teardown turns it off again before the
// agent boots to clean. A driver without secure boot support only logs a
// warning, as Ironic does; any other BMC failure fails the step.

// secureBootIfRequested turns secure boot on (deploy) or off (teardown)
// for an instance that asked for it; nothing for one that did not.
func (r *run) secureBootIfRequested(on bool) error {
	if !r.node.SecureBoot {
		return nil
	}
	name := "disable secure boot"
	if on {
		name = "enable secure boot"
	}
	return r.step(name, func() error { return r.setSecureBoot(on) })
}

func (r *run) setSecureBoot(on bool) error {
	var res BootModeResult
	err := r.hw.call(ActSetBootMode, BootModeInput{Node: r.node, SecureBoot: &on}, &res)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrTypeBMCUnsupported {
		msg := fmt.Sprintf("Secure boot was requested for node %s but its management interface does not support it: %s",
			r.node.UUID, errorText(err))
		workflow.GetLogger(r.ctx).Warn(msg)
		return r.rec.local(ActRecordBootMode, BootModeRecord{NodeUUID: r.node.UUID, Event: msg, Severity: "WARNING"}, nil)
	}
	if err != nil {
		return err
	}
	event := fmt.Sprintf("Secure boot has been disabled for node %s", r.node.UUID)
	if on {
		event = fmt.Sprintf("Secure boot has been enabled for node %s", r.node.UUID)
	}
	return r.rec.local(ActRecordBootMode, BootModeRecord{NodeUUID: r.node.UUID, SecureBoot: res.SecureBoot, Event: event}, nil)
}

// secureBootForNetbootDeploy is secureBootIfRequested(true) for the ramdisk
// and anaconda deploys (Ironic's ramdisk and anaconda deploys call
// configure_secure_boot_if_needed too).
func (r *run) secureBootForNetbootDeploy() error {
	return r.secureBootIfRequested(true)
}
