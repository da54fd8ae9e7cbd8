package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// Boot mode and secure boot changes (API 1.76 states/boot_mode and
// states/secure_boot). Ironic answers 202 and lets the conductor set them
// in the background; here a short workflow holds the node lock, sets the
// mode through the BMC and records what the BMC reads back in the node's
// boot_mode and secure_boot (or the failure in last_error).
const (
	WorkflowChangeBootMode = "ChangeBootMode"
	// ActSetBootMode sets the boot mode or the secure boot state through
	// the BMC and reads it back (a hardware activity).
	ActSetBootMode = "SetBootMode"
	// ActRecordBootMode writes the result into the node. Local activity.
	ActRecordBootMode = "RecordBootMode"
)

// BootModeRequest starts ChangeBootMode: one of BootMode ("uefi", "bios")
// and SecureBoot.
type BootModeRequest struct {
	NodeUUID       string `json:"node_uuid"`
	BootMode       string `json:"boot_mode,omitempty"`
	SecureBoot     *bool  `json:"secure_boot,omitempty"`
	ConductorGroup string `json:"conductor_group"`
}

// BootModeInput is ActSetBootMode's input.
type BootModeInput struct {
	Node       NodeInfo `json:"node"`
	BootMode   string   `json:"boot_mode,omitempty"`
	SecureBoot *bool    `json:"secure_boot,omitempty"`
}

// BootModeResult is what the BMC reads back after the change.
type BootModeResult struct {
	BootMode   string `json:"boot_mode,omitempty"`
	SecureBoot *bool  `json:"secure_boot,omitempty"`
}

// BootModeRecord is ActRecordBootMode's input: the values to record (empty
// and nil keep the node's) or the failure.
type BootModeRecord struct {
	NodeUUID   string `json:"node_uuid"`
	BootMode   string `json:"boot_mode,omitempty"`
	SecureBoot *bool  `json:"secure_boot,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	Event      string `json:"event"`
	Severity   string `json:"severity,omitempty"`
}

// ChangeBootMode sets the boot mode or secure boot state of a node.
func ChangeBootMode(ctx workflow.Context, req BootModeRequest) error {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpBootMode)
	if err != nil {
		return err
	}
	what := "boot mode " + req.BootMode
	if req.SecureBoot != nil {
		what = fmt.Sprintf("secure boot state %v", *req.SecureBoot)
	}
	var res BootModeResult
	err = r.hw.call(ActSetBootMode, BootModeInput{Node: r.node, BootMode: req.BootMode, SecureBoot: req.SecureBoot}, &res)
	rec := BootModeRecord{NodeUUID: req.NodeUUID, BootMode: res.BootMode, SecureBoot: res.SecureBoot,
		Event: fmt.Sprintf("Set %s", what)}
	if err != nil {
		rec.LastError = fmt.Sprintf("Failed to set %s for node %s: %s", what, req.NodeUUID, errorText(err))
		rec.Event, rec.Severity = rec.LastError, "ERROR"
	}
	// The failure is the node's last_error, as Ironic's conductor records
	// it; the workflow itself ends.
	return r.rec.local(ActRecordBootMode, rec, nil)
}
