package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Bounds of the wait for one component's update task, overridable per node
// in driver_info (seconds): a BIOS or BMC flash takes minutes, and the BMC
// may not answer while it resets itself.
const (
	DriverInfoFirmwareTimeout      = "firmware_update_timeout"
	DriverInfoFirmwarePollInterval = "firmware_update_poll_interval"
	DefaultFirmwareTimeout         = time.Hour
	DefaultFirmwarePollInterval    = 15 * time.Second
)

// keyFirmwareCall is the StartFirmwareUpdate call that last asked the BMC
// for an update, and the task it got (driver_internal_info; as Ironic
// keeps redfish_fw_updates there).
const keyFirmwareCall = "firmware_update_call"

type firmwareCall struct {
	Call string `json:"call"`
	URI  string `json:"task,omitempty"`
	Done bool   `json:"done,omitempty"`
}

func (a *Activities) firmwareCall(ctx context.Context, nodeUUID string) (firmwareCall, bool) {
	n, err := a.Store.GetNode(ctx, nodeUUID)
	if err != nil {
		return firmwareCall{}, false
	}
	raw, err := json.Marshal(n.DriverInternalInfo[keyFirmwareCall])
	if err != nil {
		return firmwareCall{}, false
	}
	var c firmwareCall
	return c, json.Unmarshal(raw, &c) == nil && c.Call != ""
}

func (a *Activities) recordFirmwareCall(ctx context.Context, nodeUUID string, c firmwareCall) error {
	if c.Call == "" {
		return nil
	}
	return storeErr(a.Store.MergeDriverInternalInfo(ctx, nodeUUID, map[string]any{keyFirmwareCall: c}), "record the firmware update call of node %s", nodeUUID)
}

// firmwareDriver is the node's BMC driver as a bmc.Firmware.
func (a *Activities) firmwareDriver(ctx context.Context, node workflows.NodeInfo) (bmc.Driver, bmc.Firmware, error) {
	d, err := a.driver(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	fw, ok := d.(bmc.Firmware)
	if !ok {
		d.Close()
		return nil, nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the %s driver of node %s cannot update firmware", node.Driver, node.UUID), workflows.ErrTypeBMCUnsupported, nil)
	}
	return d, fw, nil
}

// syncFirmware reads the BMC's versions into the store.
func (a *Activities) syncFirmware(ctx context.Context, node workflows.NodeInfo, fw bmc.Firmware) (map[string]string, error) {
	comps, err := fw.FirmwareComponents(ctx)
	if err != nil {
		return nil, bmcErr(err, "read the firmware versions of node %s", node.UUID)
	}
	versions := make(map[string]string, len(comps))
	readings := make([]store.FirmwareReading, 0, len(comps))
	for _, c := range comps {
		versions[c.Component] = c.Version
		readings = append(readings, store.FirmwareReading{Component: c.Component, Version: c.Version,
			Vendor: c.Vendor, Model: c.Model, SerialNumber: c.SerialNumber})
	}
	if err := a.Store.SyncFirmware(ctx, node.UUID, readings); err != nil {
		return nil, storeErr(err, "record the firmware versions of node %s", node.UUID)
	}
	return versions, nil
}

// StartFirmwareUpdate starts one component's update (workflows/firmware.go).
// Before the first component it shows the step and caches the versions
// the BMC reports, as Ironic's update step does, so that initial_version
// is what the machine had.
func (a *Activities) StartFirmwareUpdate(ctx context.Context, in workflows.FirmwareUpdateInput) (workflows.FirmwareTaskRef, error) {
	var ref workflows.FirmwareTaskRef
	n, err := a.Store.GetNode(ctx, in.Node.UUID)
	if err != nil {
		return ref, storeErr(err, "load node %s", in.Node.UUID)
	}
	ref.Timeout, ref.PollInterval = DefaultFirmwareTimeout, DefaultFirmwarePollInterval
	for key, into := range map[string]*time.Duration{DriverInfoFirmwareTimeout: &ref.Timeout, DriverInfoFirmwarePollInterval: &ref.PollInterval} {
		d, ok, err := workflows.DriverInfoSeconds(n.DriverInfo, key)
		if err != nil {
			return ref, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeInvalidConfig, nil)
		}
		if ok {
			*into = d
		}
	}
	if in.Index == 0 {
		if err := a.showStep(ctx, in.Node.UUID, &provision.RunningStep{Kind: in.Kind, Step: in.Step}); err != nil {
			return ref, err
		}
	}
	d, fw, err := a.firmwareDriver(ctx, in.Node)
	if err != nil {
		return ref, err
	}
	defer d.Close()
	if in.Index == 0 {
		if _, err := a.syncFirmware(ctx, in.Node, fw); err != nil {
			return ref, err
		}
	}
	// A worker that died after the BMC took the update runs this call
	// again: the task it recorded is watched, not a second update started.
	id := callID(ctx)
	if prev, ok := a.firmwareCall(ctx, in.Node.UUID); ok && id != "" && prev.Call == id && (prev.URI != "" || prev.Done) {
		ref.URI, ref.Done = prev.URI, prev.Done
		return ref, nil
	}
	if in.Setting.Checksum != "" {
		if err := verifyFirmwareChecksum(ctx, in.Node.UUID, in.Setting); err != nil {
			return ref, err
		}
	}
	if err := a.recordFirmwareCall(ctx, in.Node.UUID, firmwareCall{Call: id}); err != nil {
		return ref, err
	}
	crashPoint(ctx, in.Node.UUID, workflows.ActStartFirmwareUpdate, "start")
	task, err := fw.StartFirmwareUpdate(ctx, bmc.FirmwareUpdate{Component: in.Setting.Component, URL: in.Setting.URL})
	if err != nil {
		return ref, bmcErr(err, "start the firmware update of %s on node %s", in.Setting.Component, in.Node.UUID)
	}
	ref.URI, ref.Done = task.URI, task.Done
	if err := a.recordFirmwareCall(ctx, in.Node.UUID, firmwareCall{Call: id, URI: task.URI, Done: task.Done}); err != nil {
		return ref, err
	}
	crashPoint(ctx, in.Node.UUID, workflows.ActStartFirmwareUpdate, "after")
	msg := fmt.Sprintf("Firmware update of %s from %s started: BMC task %s", in.Setting.Component, in.Setting.URL, task.URI)
	if task.Done {
		msg = fmt.Sprintf("Firmware update of %s from %s applied by the BMC", in.Setting.Component, in.Setting.URL)
	}
	return ref, a.history(ctx, in.Node.UUID, "", string(in.Kind), msg)
}

// PollFirmwareTask reads the task once. A BMC that does not answer, or
// answers that it is busy, is reported in the result: the workflow keeps
// waiting until its timeout (the BMC resets itself after a bmc update).
func (a *Activities) PollFirmwareTask(ctx context.Context, in workflows.FirmwareTaskInput) (workflows.FirmwareTaskState, error) {
	d, fw, err := a.firmwareDriver(ctx, in.Node)
	if err != nil {
		return workflows.FirmwareTaskState{}, err
	}
	defer d.Close()
	st, err := fw.FirmwareTaskStatus(ctx, in.URI)
	if err != nil {
		if bmc.Retryable(err) || errors.Is(err, bmc.ErrAuth) && in.Component == bmc.ComponentBMC {
			// A BMC that reset itself may refuse the old session's
			// credentials for a moment too.
			return workflows.FirmwareTaskState{Unreachable: err.Error()}, nil
		}
		return workflows.FirmwareTaskState{}, bmcErr(err, "read firmware task %s of node %s", in.URI, in.Node.UUID)
	}
	return workflows.FirmwareTaskState{State: st.State, Percent: st.Percent, Done: st.Done, Failed: st.Failed, Messages: st.Messages, ResetRequired: st.ResetRequired}, nil
}

// RecordFirmware reads the versions back after the update.
func (a *Activities) RecordFirmware(ctx context.Context, in workflows.FirmwareRecordInput) error {
	d, fw, err := a.firmwareDriver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	versions, err := a.syncFirmware(ctx, in.Node, fw)
	if err != nil {
		return err
	}
	if err := a.Store.DeleteDriverInternalInfoKeys(ctx, in.Node.UUID, keyFirmwareCall); err != nil {
		return storeErr(err, "clear the firmware update call of node %s", in.Node.UUID)
	}
	return a.history(ctx, in.Node.UUID, "", string(in.Kind), fmt.Sprintf("Firmware versions after the update: %v", versions))
}
