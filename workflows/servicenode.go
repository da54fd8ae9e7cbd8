package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// WorkflowServiceNode is the name ServiceNode is registered and started
// under.
const WorkflowServiceNode = "ServiceNode"

// ServiceNode is Ironic's servicing (API 1.87; Ironic's node servicing
// documentation): active → servicing → service wait → active, running the
// request's service_steps in the user's order on a deployed node. It is
// manual cleaning (CleanNode) on an active node that must stay bootable:
// the agent boots unless disable_ramdisk (the instance is down meanwhile),
// and once the steps ran the agent powers off, its boot is removed and the
// instance boots again from disk, as a deploy's last steps boot it.
// driver_internal_info keeps service_steps and service_step_index while
// it runs, service_step shows the running step. A failed step waits in
// service failed for retry, skip-step or abort; abort in service wait ends
// in service failed (Ironic's state machine), abort in service failed
// boots the instance again and returns the node to active.
func ServiceNode(ctx workflow.Context, req provision.Request) error {
	return runUserSteps(ctx, req, userStepsOperation{
		op: provision.OpService, kind: provision.StepKindService, what: "Servicing", noun: "service", gerund: "servicing",
		active: provision.Servicing, fail: provision.ServiceFailed, goal: provision.Active,
		steps: req.ServiceSteps, disableRamdisk: req.DisableRamdisk, cacheBIOS: (*run).cacheBIOSService, run: (*run).service,
		// An operator's abort of a failed step: Ironic's state machine goes
		// service failed --abort--> active. (A refused plan, failPlan, set
		// abortMessage: it stays service failed.)
		abortInFailure: (*run).abortToActive,
	})
}

func (r *run) service(user []UserStep, perr error, disableRamdisk bool) error {
	if err := r.runManualPlan(servicing, user, perr, disableRamdisk); err != nil {
		return err
	}
	if disableRamdisk {
		return nil
	}
	return r.bootInstanceAfterService()
}

// bootInstanceAfterService is Ironic's tear_down_service and the
// instance's boot: the agent powers off (the BMC makes sure), its boot is
// removed, and the instance boots from disk, as a deploy's
// prepare_instance_boot and boot_instance do.
func (r *run) bootInstanceAfterService() error {
	if err := r.step("tear down service", func() error {
		return r.powerOffAgent(nil)
	}); err != nil {
		return err
	}
	if err := r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootAgent, nil)
	}); err != nil {
		return err
	}
	if err := r.step("set boot device disk", func() error { return r.hw.bootDevice("disk", true) }); err != nil {
		return err
	}
	return r.step("boot instance", func() error { return r.hw.power("power on") })
}

// abortToActive ends a servicing aborted in service failed: the agent's
// boot goes, the instance boots again, the node is active.
func (r *run) abortToActive(disableRamdisk bool) error {
	msg := "By request, the service operation was aborted; the instance boots again"
	if err := r.rec.enter(provision.Servicing, provision.Active, msg); err != nil {
		return err
	}
	if !disableRamdisk {
		if err := r.bootInstanceAfterService(); err != nil {
			return r.finish(err)
		}
	}
	return r.rec.record(RecordStateInput{To: provision.Active, Event: "Servicing aborted: the node is active again", ClearAgent: true})
}

// serviceStep runs one step of a service plan: an interface's as an
// activity, the agent's in service wait (where Ironic allows abort).
func (r *run) serviceStep(s provision.Step, underAgent bool) error {
	if s.OutOfBand {
		if s.StepID == provision.StepFirmwareUpdate {
			return r.firmwareStep(provision.StepKindService, s, underAgent) // workflows/firmware.go
		}
		if r.biosStepUnderAgent(s, underAgent) {
			return r.biosStepWithAgent(s) // workflows/bios.go
		}
		return r.step(s.Name(), func() error {
			return r.hw.call(ActRunInterfaceStep, InterfaceStepInput{Node: r.node, Kind: provision.StepKindService, Step: s}, nil)
		})
	}
	if err := r.rec.enter(provision.ServiceWait, provision.Active, fmt.Sprintf("Running step %s on the agent", s.Name())); err != nil {
		return err
	}
	err := r.inBand(s)
	if errors.Is(err, errAborted) && r.operator.abortMessage == "" && r.rec.status.ProvisionState != provision.ServiceFailed {
		r.operator.abortMessage = fmt.Sprintf("By request, the service operation was aborted on step \"%s\"", s.Name())
	}
	if err != nil {
		return err
	}
	return r.rec.enter(provision.Servicing, provision.Active, stepFinished(s, provision.StepKindService, r.agent.lastResult))
}
