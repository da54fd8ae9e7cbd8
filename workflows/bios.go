package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
)

// ActCacheBIOSSettings reads the node's BIOS settings through its bios
// interface and makes them the node's cached ones (Ironic's
// cache_bios_settings; a hardware activity).
const ActCacheBIOSSettings = "CacheBIOSSettings"

// cacheBIOS refreshes the cached BIOS settings of a node whose bios
// interface reads them (redfish), as Ironic does when a node is verified
// and when cleaning starts. A failure is logged, not the operation's, as in
// Ironic.
func (r *run) cacheBIOS() {
	if workflow.GetVersion(r.ctx, changeCacheBIOSSettings, workflow.DefaultVersion, 1) != 1 ||
		r.node.BIOSInterface != hardware.Redfish {
		return
	}
	if err := r.hardware(ActCacheBIOSSettings, r.node, nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("cache BIOS settings", "node", r.node.UUID, "error", errorText(err))
	}
}

// cacheBIOSManual is cacheBIOS when manual cleaning starts: Ironic's
// do_node_clean caches the BIOS settings for manual and automated cleaning
// alike. Behind changeCacheBIOSManualClean, asked only for a node whose
// bios interface reads them, so no other history gains a marker.
func (r *run) cacheBIOSManual() {
	if r.node.BIOSInterface != hardware.Redfish ||
		workflow.GetVersion(r.ctx, changeCacheBIOSManualClean, workflow.DefaultVersion, 1) != 1 {
		return
	}
	r.cacheBIOSNow()
}

// cacheBIOSService is cacheBIOS when servicing starts, so that the cached
// settings an operator reads (GET /v1/nodes/{id}/bios) are the machine's
// before its service steps change them; the bios steps refresh them again
// once they ran (activities/bios.go), as Ironic's cache_bios_settings
// decorator does after a bios step. Behind changeCacheBIOSService, asked
// only for a node whose bios interface reads them.
func (r *run) cacheBIOSService() {
	if r.node.BIOSInterface != hardware.Redfish ||
		workflow.GetVersion(r.ctx, changeCacheBIOSService, workflow.DefaultVersion, 1) != 1 {
		return
	}
	r.cacheBIOSNow()
}

// cacheBIOSNow runs ActCacheBIOSSettings; a failure is logged, not the
// operation's, as in Ironic.
func (r *run) cacheBIOSNow() {
	if err := r.hardware(ActCacheBIOSSettings, r.node, nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("cache BIOS settings", "node", r.node.UUID, "error", errorText(err))
	}
}
