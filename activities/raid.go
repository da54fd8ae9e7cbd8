package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// raidArgs are create_configuration's arguments with Ironic's defaults.
type raidArgs struct {
	CreateRootVolume     *bool `json:"create_root_volume"`
	CreateNonrootVolumes *bool `json:"create_nonroot_volumes"`
	DeleteExisting       bool  `json:"delete_existing"`
}

func invalid(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), workflows.ErrTypeInvalidConfig, nil)
}

// runRedfishRAID runs the redfish raid interface's steps, as Ironic's
// redfish raid interface does through the BMC's Storage Volumes:
// create_configuration builds the node's target_raid_config (its root
// volume, its other volumes, or both; deleting the existing ones first
// with delete_existing) and records what was built in raid_config;
// delete_configuration deletes every volume and clears raid_config.
func (a *Activities) runRedfishRAID(ctx context.Context, in workflows.InterfaceStepInput) error {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	r, ok := d.(bmc.RAID)
	if !ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the %s driver of node %s cannot configure RAID", in.Node.Driver, in.Node.UUID), workflows.ErrTypeBMCUnsupported, nil)
	}
	deleteAll := func() error {
		vols, err := r.Volumes(ctx)
		if err != nil {
			return bmcErr(err, "list the volumes of node %s", in.Node.UUID)
		}
		for _, v := range vols {
			if err := r.DeleteVolume(ctx, v.URI); err != nil {
				return bmcErr(err, "delete volume %s of node %s", v.URI, in.Node.UUID)
			}
		}
		return nil
	}
	switch in.Step.Step {
	case "delete_configuration":
		if err := deleteAll(); err != nil {
			return err
		}
		return a.recordRAID(ctx, in, map[string]any{}, "RAID configuration deleted")
	case "create_configuration":
	default:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("raid interface redfish has no step %s", in.Step.Step), workflows.ErrTypeBMCUnsupported, nil)
	}
	var args raidArgs
	if len(in.Step.Args) > 0 {
		if err := json.Unmarshal(in.Step.Args, &args); err != nil {
			return invalid("create_configuration arguments: %v", err)
		}
	}
	root := args.CreateRootVolume == nil || *args.CreateRootVolume
	nonroot := args.CreateNonrootVolumes == nil || *args.CreateNonrootVolumes
	n, err := a.Store.GetNode(ctx, in.Node.UUID)
	if err != nil {
		return storeErr(err, "load node %s", in.Node.UUID)
	}
	disks, _ := n.TargetRAIDConfig["logical_disks"].([]any)
	if len(disks) == 0 {
		return invalid("Node %s has no target RAID configuration.", in.Node.UUID)
	}
	if !root && !nonroot {
		return invalid("create_root_volume and create_nonroot_volumes cannot both be false")
	}
	if args.DeleteExisting {
		if err := deleteAll(); err != nil {
			return err
		}
	}
	var built []any
	var names []string
	var rootDisk map[string]any
	for i, raw := range disks {
		ld, _ := raw.(map[string]any)
		isRoot, _ := ld["is_root_volume"].(bool)
		if isRoot && !root || !isRoot && !nonroot {
			continue
		}
		spec := bmc.VolumeSpec{}
		spec.RAIDLevel, _ = ld["raid_level"].(string)
		spec.Name, _ = ld["volume_name"].(string)
		spec.Controller, _ = ld["controller"].(string)
		if f, ok := ld["size_gb"].(float64); ok {
			spec.SizeGB = int64(f)
		}
		if f, ok := ld["number_of_physical_disks"].(float64); ok {
			spec.NumberOfDisks = int(f)
		}
		if pd, ok := ld["physical_disks"].([]any); ok {
			for _, p := range pd {
				s, _ := p.(string)
				spec.PhysicalDisks = append(spec.PhysicalDisks, s)
			}
		}
		v, err := r.CreateVolume(ctx, spec)
		if err != nil {
			return bmcErr(err, "create logical disk %d (RAID %s) of node %s", i, spec.RAIDLevel, in.Node.UUID)
		}
		out := map[string]any{}
		for k, val := range ld {
			out[k] = val
		}
		out["volume_name"], out["controller"] = v.Name, v.Controller
		drives := make([]any, len(v.Drives))
		for j, dr := range v.Drives {
			drives[j] = dr
		}
		out["physical_disks"] = drives
		if v.CapacityBytes > 0 {
			out["size_gb"] = v.CapacityBytes >> 30
		}
		if v.RootDeviceHint != nil {
			out["root_device_hint"] = v.RootDeviceHint
		}
		if isRoot {
			rootDisk = out
		}
		built = append(built, out)
		names = append(names, fmt.Sprintf("%s (RAID %s on %s)", v.Name, spec.RAIDLevel, strings.Join(v.Drives, ", ")))
	}
	event := "RAID configuration created: " + strings.Join(names, "; ")
	if h, ok := rootDisk["root_device_hint"]; ok {
		event += fmt.Sprintf("; root device hint %v", h)
	}
	return a.recordRAID(ctx, in, map[string]any{"logical_disks": built}, event)
}

// recordRAID keeps what the BMC built as the node's raid_config and, as
// Ironic's raid.update_raid_info does, takes the root volume's size as
// properties.local_gb, its root_device_hint (when the BMC named the
// volume) as properties.root_device, and its level as the raid_level
// capability, so that the next deploy writes the image onto the new
// volume.
func (a *Activities) recordRAID(ctx context.Context, in workflows.InterfaceStepInput, cfg map[string]any, event string) error {
	return a.recordRAIDConfig(ctx, in.Node.UUID, in.Kind, cfg, event)
}

func (a *Activities) recordRAIDConfig(ctx context.Context, nodeUUID string, kind provision.StepKind, cfg map[string]any, event string) error {
	root := rootLogicalDisk(cfg)
	if _, err := a.Store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		n.RAIDConfig = cfg
		if root == nil {
			return nil
		}
		if n.Properties == nil {
			n.Properties = map[string]any{}
		}
		if size, ok := root["size_gb"]; ok && size != "MAX" {
			n.Properties["local_gb"] = size
		}
		if h, ok := root["root_device_hint"]; ok {
			n.Properties["root_device"] = h
		}
		if level, ok := root["raid_level"].(string); ok {
			caps, _ := n.Properties["capabilities"].(string)
			n.Properties["capabilities"] = setCapability(caps, "raid_level", level)
		}
		return nil
	}); err != nil {
		return storeErr(err, "record the raid_config of node %s", nodeUUID)
	}
	return a.history(ctx, nodeUUID, "", string(kind), event)
}

// rootLogicalDisk is the configuration's logical disk with is_root_volume.
func rootLogicalDisk(cfg map[string]any) map[string]any {
	disks, _ := cfg["logical_disks"].([]any)
	for _, raw := range disks {
		ld, _ := raw.(map[string]any)
		if isRoot, _ := ld["is_root_volume"].(bool); isRoot {
			return ld
		}
	}
	return nil
}

// setCapability sets key in a "k1:v1,k2:v2" capabilities string, as
// Ironic's utils.get_updated_capabilities does.
func setCapability(caps, key, value string) string {
	var out []string
	found := false
	for _, kv := range strings.Split(caps, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, ":")
		if strings.TrimSpace(k) == key {
			kv, found = key+":"+value, true
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, key+":"+value)
	}
	return strings.Join(out, ",")
}
