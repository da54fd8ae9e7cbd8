package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// BIOS step timing: how often the BIOS is read back after the reboot, and
// how much of the activity's time is kept for the failure report.
var (
	biosVerifyInterval = 3 * time.Second
	biosVerifyMargin   = 5 * time.Second
)

// ErrTypeBIOSRefused: the settings were refused before anything was
// written (the registry forbids a value), or the BMC did not apply them.
const ErrTypeBIOSRefused = "BIOSSettingsRefused"

// runBIOSStep runs the redfish bios interface's apply_configuration and
// factory_reset (Ironic's redfish BIOS interface): the settings are
// checked against the BMC's attribute registry and written as pending,
// the node reboots so that its firmware applies them, and the values are
// read back; the node's cached settings are refreshed afterwards.
func (a *Activities) runBIOSStep(ctx context.Context, in workflows.InterfaceStepInput) error {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	bc, ok := d.(bmc.BIOSConfigurer)
	if !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the BMC driver of node %s cannot configure the BIOS", in.Node.UUID), workflows.ErrTypeBMCUnsupported, nil)
	}
	node, kind := in.Node.UUID, string(in.Kind)
	var values []bmc.BIOSValue
	switch in.Step.Step {
	case "apply_configuration":
		if values, err = biosArgs(in.Step.Args); err != nil {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("step %s of node %s: %v", in.Step.Name(), node, err), ErrTypeBIOSRefused, nil)
		}
		if err := bc.ApplyBIOS(ctx, values); err != nil {
			if errors.Is(err, bmc.ErrInvalidInput) {
				return temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("step %s of node %s: %v", in.Step.Name(), node, err), ErrTypeBIOSRefused, err)
			}
			return bmcErr(err, "apply BIOS settings of node %s", node)
		}
		_ = a.history(ctx, node, "", kind, fmt.Sprintf("BIOS settings %s written; rebooting so that the firmware applies them", biosNames(values)))
	case "factory_reset":
		if err := bc.ResetBIOS(ctx); err != nil {
			return bmcErr(err, "reset the BIOS settings of node %s", node)
		}
		_ = a.history(ctx, node, "", kind, "BIOS reset to its defaults requested; rebooting so that the firmware applies it")
	default:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("bios interface redfish of node %s has no step %s", node, in.Step.Step), workflows.ErrTypeBMCUnsupported, nil)
	}
	if in.RebootInto != "" {
		// The agent runs on the node: its reboot goes back into the agent
		// ramdisk, as Ironic's reboot_to_finish_step prepares the agent's
		// boot before it reboots. Set here, not by the workflow, so that a
		// retried attempt (the settings still pending) boots the agent too.
		s := bmc.BootSetting{Device: bmc.BootDevice(in.RebootInto), Mode: bmc.BootMode(in.Node.BootMode)}
		var err error
		if s.HTTPBootURI, err = a.httpBootURI(ctx, in.Node, s.Device); err != nil {
			return err
		}
		if err := d.SetBootDevice(ctx, s); err != nil {
			return bmcErr(err, "set boot device %s on node %s before its BIOS reboot", in.RebootInto, node)
		}
	}
	if err := d.SetPower(ctx, bmc.ActionReboot); err != nil {
		return bmcErr(err, "reboot node %s to apply its BIOS settings", node)
	}
	if len(values) > 0 {
		if err := a.verifyBIOS(ctx, bc, node, values); err != nil {
			a.cacheBIOS(ctx, bc, node)
			return err
		}
	}
	a.cacheBIOS(ctx, bc, node)
	return a.history(ctx, node, "", kind, fmt.Sprintf("Step %s done: the BIOS settings are in effect", in.Step.Name()))
}

// verifyBIOS reads the BIOS back until it holds the values. A BMC that
// still has them pending when the activity's time runs out gets a retry
// (the step writes them again); one that reports them applied without
// holding them fails the step.
func (a *Activities) verifyBIOS(ctx context.Context, bc bmc.BIOSConfigurer, node string, values []bmc.BIOSValue) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	deadline = deadline.Add(-biosVerifyMargin)
	for {
		miss, pending, err := bc.VerifyBIOS(ctx, values)
		if err == nil && len(miss) == 0 {
			return nil
		}
		if err == nil && !pending {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("The BIOS settings of node %s were not applied after the reboot: %s", node, strings.Join(miss, "; ")),
				ErrTypeBIOSRefused, nil)
		}
		if !time.Now().Add(biosVerifyInterval).Before(deadline) {
			if err != nil {
				return bmcErr(err, "read back the BIOS settings of node %s", node)
			}
			return temporal.NewApplicationError(
				fmt.Sprintf("The BIOS settings of node %s are still pending after the reboot: %s", node, strings.Join(miss, "; ")),
				"BIOSSettingsPending")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(biosVerifyInterval):
		}
	}
}

// cacheBIOS refreshes the node's cached settings (Ironic's
// cache_bios_settings); a failure is logged, not the step's.
func (a *Activities) cacheBIOS(ctx context.Context, bc bmc.BIOSConfigurer, node string) {
	if err := a.CacheBIOSFrom(ctx, bc, node); err != nil {
		a.Log.Warn("cache BIOS settings", "node", node, "error", err)
	}
}

// CacheBIOSSettings refreshes the node's cached BIOS settings through its
// BMC (ActCacheBIOSSettings).
func (a *Activities) CacheBIOSSettings(ctx context.Context, node workflows.NodeInfo) error {
	d, err := a.driver(ctx, node)
	if err != nil {
		return err
	}
	defer d.Close()
	bc, ok := d.(bmc.BIOSConfigurer)
	if !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the BMC driver of node %s cannot read the BIOS", node.UUID), workflows.ErrTypeBMCUnsupported, nil)
	}
	if err := a.CacheBIOSFrom(ctx, bc, node.UUID); err != nil {
		return bmcErr(err, "cache the BIOS settings of node %s", node.UUID)
	}
	return nil
}

// CacheBIOSFrom reads the BIOS settings through bc and makes them the
// node's cached ones.
func (a *Activities) CacheBIOSFrom(ctx context.Context, bc bmc.BIOSConfigurer, node string) error {
	list, err := bc.BIOSSettings(ctx)
	if err != nil {
		return err
	}
	out := make([]store.BIOSSetting, 0, len(list))
	for _, s := range list {
		b := store.BIOSSetting{
			Name: s.Name, Value: s.Value, AllowableValues: s.AllowableValues,
			LowerBound: s.LowerBound, UpperBound: s.UpperBound, MinLength: s.MinLength, MaxLength: s.MaxLength,
			ReadOnly: s.ReadOnly, ResetRequired: s.ResetRequired, Unique: s.Unique,
		}
		if s.AttributeType != "" {
			t := s.AttributeType
			b.AttributeType = &t
		}
		out = append(out, b)
	}
	return a.Store.ReplaceBIOSSettings(ctx, node, out)
}

// biosArgs reads apply_configuration's settings argument: a non-empty
// list of {"name": ..., "value": ...}.
// fakeApplyBIOS is the fake bios interface's apply_configuration, as
// Ironic's FakeBIOS does it: the settings are written into the node's BIOS
// settings (new ones created, changed ones updated, the rest kept), so
// that GET /v1/nodes/{node}/bios shows them; no BMC is involved.
func (a *Activities) fakeApplyBIOS(ctx context.Context, in workflows.InterfaceStepInput) error {
	node := in.Node.UUID
	values, err := biosArgs(in.Step.Args)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("step %s of node %s: %v", in.Step.Name(), node, err), ErrTypeBIOSRefused, nil)
	}
	cur, err := a.Store.ListBIOSSettings(ctx, node)
	if err != nil {
		return storeErr(err, "read the BIOS settings of node %s", node)
	}
	byName := make(map[string]int, len(cur))
	for i, b := range cur {
		byName[b.Name] = i
	}
	for _, v := range values {
		val := fmt.Sprint(v.Value)
		if i, ok := byName[v.Name]; ok {
			cur[i].Value = val
			continue
		}
		byName[v.Name] = len(cur)
		cur = append(cur, store.BIOSSetting{NodeUUID: node, Name: v.Name, Value: val})
	}
	if err := a.Store.ReplaceBIOSSettings(ctx, node, cur); err != nil {
		return storeErr(err, "store the BIOS settings of node %s", node)
	}
	return a.history(ctx, node, "", string(in.Kind), fmt.Sprintf("Step %s ran: BIOS settings %s stored (fake bios interface)", in.Step.Name(), biosNames(values)))
}

func biosArgs(raw json.RawMessage) ([]bmc.BIOSValue, error) {
	var args struct {
		Settings []map[string]any `json:"settings"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("settings must be a list of {\"name\": ..., \"value\": ...}: %v", err)
		}
	}
	if len(args.Settings) == 0 {
		return nil, errors.New("argument settings is required: a list of {\"name\": ..., \"value\": ...}")
	}
	out := make([]bmc.BIOSValue, 0, len(args.Settings))
	for i, s := range args.Settings {
		name, _ := s["name"].(string)
		v, has := s["value"]
		if name == "" || !has {
			return nil, fmt.Errorf("setting %d of settings needs a name and a value", i)
		}
		out = append(out, bmc.BIOSValue{Name: name, Value: v})
	}
	return out, nil
}

func biosNames(values []bmc.BIOSValue) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = v.Name + "=" + bmc.BIOSText(v.Value)
	}
	return strings.Join(parts, ", ")
}
