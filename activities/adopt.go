package activities

import (
	"context"
	"fmt"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// ValidateAdoption is the check of adoption (AdoptNode): what keeps the
// node from being adopted, worded as Ironic words it, or "" when nothing
// does. Local activity: it reads the node and its ports from the store,
// so that instance_info (which may hold a config drive) stays out of the
// workflow's history.
func (a *Activities) ValidateAdoption(ctx context.Context, nodeUUID string) (string, error) {
	n, macs, err := a.Store.GetNodeForWork(ctx, nodeUUID)
	if err != nil {
		return "", storeErr(err, "load node %s to adopt it", nodeUUID)
	}
	return adoptionProblem(n, macs), nil
}

// adoptionProblem follows Ironic's conductor (_do_adoption): the boot
// interface is validated only when the instance boots through it, not
// from its disk — deploy interfaces ramdisk and anaconda, Ironic's boot
// options "ramdisk" and "kickstart" (deploy_utils.get_boot_option) — and
// then as Ironic's PXE boot validates (pxe_base.validate): the node has a
// port to boot from, and instance_info says what to boot
// (deploy_utils.get_image_instance_info). A boot interface that boots
// nothing (fake) checks nothing, as Ironic's fake boot. The deploy
// interface's take-over (prepare and take_over in the adopting state)
// needs nothing of the node for any of ironflow's deploy interfaces.
func adoptionProblem(n *store.Node, macs []string) string {
	flow := hardware.DeployOf(hardware.Interface(n.DeployInterface)).Flow()
	if flow != hardware.FlowRamdisk && flow != hardware.FlowInstaller {
		return ""
	}
	boot := hardware.Interface(n.BootInterface)
	if impl, _ := hardware.Implemented(hardware.KindBoot, boot); !impl.Reads(hardware.KeyDeployKernel) {
		return ""
	}
	if !hardware.BootOf(boot).VirtualMedia() && len(macs) == 0 {
		return fmt.Sprintf("Node %s does not have any port associated with it", n.UUID)
	}
	text := func(k string) string { v, _ := hardware.Text(n.InstanceInfo, k); return v }
	if text("boot_iso") != "" {
		if text("image_source") != "" {
			return "An 'image_source' and 'boot_iso' parameter may not be specified at the same time."
		}
		return ""
	}
	// The keys Ironic requires, in its order.
	keys := []string{"kernel", "ramdisk"}
	if flow == hardware.FlowInstaller {
		keys = []string{"image_source"}
		if _, isGlance := glance.ImageID(text("image_source")); !isGlance {
			keys = append(keys, "kernel", "ramdisk")
		}
	}
	var missing []string
	for _, k := range keys {
		if text(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("Cannot validate image information for node %s because one or more parameters are missing from its "+
		"instance_info and insufficient information is present to boot from a remote volume. Missing are: %s", n.UUID, pyliteral.List(missing))
}
