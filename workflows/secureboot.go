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
// warning, as Ironic does; any other BMC failure fails the step. Behind
// changeDeploySecureBoot, asked only for an instance that asks for secure
// boot (an agent deploy takes it with changeAgentDeployBaseline).

// secureBootIfRequested turns secure boot on (deploy) or off (teardown)
// for an instance that asked for it; nothing for one that did not. The
// gate is asked only for such an instance: another's run is the same on
// either side of it (docs/versioning.md, "Asking a gate only where it
// changes something").
func (r *run) secureBootIfRequested(on bool) error {
	if !r.node.SecureBoot || (!r.implied(changeDeploySecureBoot) && workflow.GetVersion(r.ctx, changeDeploySecureBoot, workflow.DefaultVersion, 1) != 1) {
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
	err := r.hardware(ActSetBootMode, BootModeInput{Node: r.node, SecureBoot: &on}, &res)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrTypeBMCUnsupported {
		msg := fmt.Sprintf("Secure boot was requested for node %s but its management interface does not support it: %s",
			r.node.UUID, errorText(err))
		workflow.GetLogger(r.ctx).Warn(msg)
		return r.local(ActRecordBootMode, BootModeRecord{NodeUUID: r.node.UUID, Event: msg, Severity: "WARNING"}, nil)
	}
	if err != nil {
		return err
	}
	event := fmt.Sprintf("Secure boot has been disabled for node %s", r.node.UUID)
	if on {
		event = fmt.Sprintf("Secure boot has been enabled for node %s", r.node.UUID)
	}
	return r.local(ActRecordBootMode, BootModeRecord{NodeUUID: r.node.UUID, SecureBoot: res.SecureBoot, Event: event}, nil)
}

// secureBootForNetbootDeploy is secureBootIfRequested(true) for the ramdisk
// and anaconda deploys, behind changeNetbootDeploySecureBoot: a deploy
// that passed this point before the change did not set secure boot. Asked
// only for an instance that asks for secure boot.
func (r *run) secureBootForNetbootDeploy() error {
	if !r.node.SecureBoot || workflow.GetVersion(r.ctx, changeNetbootDeploySecureBoot, workflow.DefaultVersion, 1) != 1 {
		return nil
	}
	return r.secureBootIfRequested(true)
}
