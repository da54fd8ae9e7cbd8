package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// InspectNode learns what a machine is: manageable → inspecting → inspect
// wait → manageable. With inspect_interface redfish the BMC answers
// out-of-band and nothing boots; otherwise the agent boots, reports its
// inventory (POST /v1/continue_inspection, or ironflow asks it), the node's
// properties and missing ports are filled in, and the machine is powered
// off.
func InspectNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpInspect)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Inspecting, provision.InspectFailed, req.Transition.Target
	if err := r.rec.local(ActRecordInspection, InspectionRecord{NodeUUID: r.node.UUID, Started: true}, nil); err != nil {
		return err
	}
	if err := r.rec.enter(provision.Inspecting, provision.Manageable, "Inspection started"); err != nil {
		return ended(err)
	}
	method := hardware.InspectOf(r.node.InspectInterface).Method()
	if method == hardware.InspectNothing {
		// Nothing to learn (fake-hardware): Ironic's fake inspection.
		return r.rec.record(RecordStateInput{To: provision.Manageable, Event: "Inspection finished (" + string(r.node.InspectInterface) + ")"})
	}
	if method == hardware.InspectOutOfBand {
		if err := r.step("inspect out-of-band", func() error {
			return r.hw.call(ActInspectOutOfBand, r.node, nil)
		}); err != nil {
			return r.finishInspect(err)
		}
	} else {
		if err := r.inspectInBand(); err != nil {
			return r.finishInspect(err)
		}
	}
	if err := r.step("apply inventory", func() error {
		return r.rec.local(ActApplyInventory, r.node.UUID, nil)
	}); err != nil {
		return r.finishInspect(err)
	}
	if err := r.rec.local(ActRecordInspection, InspectionRecord{NodeUUID: r.node.UUID, Finished: true}, nil); err != nil {
		return err
	}
	return r.finishInspect(r.rec.record(RecordStateInput{To: provision.Manageable, Event: "Inspection finished", ClearAgent: true}))
}

func (r *run) inspectInBand() error {
	if err := r.step("boot the agent", func() error { return r.netboot(BootInspect, false) }); err != nil {
		return err
	}
	var reported bool
	if err := r.step("wait for the agent", func() error {
		hb, err := r.waitCallback(provision.InspectWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" || hb.AgentStatus == AgentStatusEnd })
		reported = hb.AgentStatus == AgentStatusEnd
		return err
	}); err != nil {
		return err
	}
	if !reported {
		// The agent heartbeats but did not post its inventory: ask it.
		if err := r.step("collect inventory", func() error {
			return r.agent.call(ActCollectInventory, r.agent.input(nil), nil)
		}); err != nil {
			return err
		}
	}
	return r.step("power off", func() error {
		if r.agent.url != "" {
			if err := r.agent.call(ActAgentPowerOff, r.agent.input(nil), nil); err != nil {
				workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
			}
		}
		if err := r.hw.power("power off"); err != nil {
			return err
		}
		return r.hw.cleanBoot(BootInspect, nil)
	})
}

// finishInspect is finish for inspection: its failure state says why and
// the machine is left off with no boot configuration.
func (r *run) finishInspect(err error) error {
	return r.finish(err)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
