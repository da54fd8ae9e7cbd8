package agent

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DefaultMinRootDiskSize is Ironic's: without hints, the smallest disk of at
// least 4 GiB is the root device.
const DefaultMinRootDiskSize = 4 << 30

const gib = 1 << 30

// rootDevice picks the disk to deploy onto from node.properties.root_device.
func (a *Agent) rootDevice(ctx context.Context, node map[string]any) (BlockDevice, error) {
	if root, ok := softwareRAIDRoot(node); ok {
		// The software RAID root volume, as IPA (agent/raid_deploy.go).
		bd, _, err := a.mdRootDevice(ctx, root)
		return bd, err
	}
	devs, err := a.cfg.Hardware.BlockDevices(ctx)
	if err != nil {
		return BlockDevice{}, fmt.Errorf("list disks: %w", err)
	}
	hints := mapOf(mapOf(node, "properties"), "root_device")
	return chooseRootDevice(devs, hints, a.cfg.MinRootDiskSize)
}

// ChooseRootDevice is chooseRootDevice for the inspection hooks
// (inspection/hooks' root-device), so that inspection reports the disk a
// deploy would write to.
func ChooseRootDevice(devs []BlockDevice, hints map[string]any, minSize int64) (BlockDevice, error) {
	return chooseRootDevice(devs, hints, minSize)
}

// chooseRootDevice applies Ironic's root device hints (size in GiB with
// optional operator, name, serial, wwn, by_path, model, vendor, hctl,
// rotational); without hints it takes the smallest disk of at least minSize.
// CD-ROMs, loop and RAM devices and read-only disks are never chosen.
func chooseRootDevice(devs []BlockDevice, hints map[string]any, minSize int64) (BlockDevice, error) {
	var cands []BlockDevice
	for _, d := range devs {
		if d.Kind != "" && d.Kind != "disk" || d.ReadOnly {
			continue
		}
		cands = append(cands, d)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Name < cands[j].Name })
	if len(hints) == 0 {
		var best *BlockDevice
		for i, d := range cands {
			if d.Size >= minSize && !d.Removable && (best == nil || d.Size < best.Size) {
				best = &cands[i]
			}
		}
		if best == nil {
			return BlockDevice{}, fmt.Errorf("%w: no disk of at least %d bytes among %d disks", errNoRootDevice, minSize, len(cands))
		}
		return *best, nil
	}
	for _, d := range cands {
		ok, err := matchHints(d, hints)
		if err != nil {
			return BlockDevice{}, err
		}
		if ok {
			return d, nil
		}
	}
	return BlockDevice{}, fmt.Errorf("%w: no disk matches root device hints %v", errNoRootDevice, hints)
}

func matchHints(d BlockDevice, hints map[string]any) (bool, error) {
	for k, v := range hints {
		var ok bool
		var err error
		switch k {
		case "size":
			ok, err = matchSize(d.Size/gib, v)
		case "name":
			want := fmt.Sprint(v)
			if !strings.HasPrefix(strings.TrimPrefix(want, "s== "), "/dev/") {
				want = strings.Replace(want, "s== ", "s== /dev/", 1)
				if !strings.HasPrefix(want, "s== ") && !strings.HasPrefix(want, "<in>") {
					want = "/dev/" + want
				}
			}
			ok = matchString(d.Name, want)
		case "serial":
			ok = matchString(d.Serial, fmt.Sprint(v))
		case "wwn":
			ok = matchString(d.WWN, fmt.Sprint(v))
		case "by_path":
			want := fmt.Sprint(v)
			ok = matchString(d.ByPath, want) || matchString(strings.TrimPrefix(d.ByPath, "/dev/disk/by-path/"), want)
		case "model":
			ok = matchString(d.Model, fmt.Sprint(v))
		case "vendor":
			ok = matchString(d.Vendor, fmt.Sprint(v))
		case "hctl":
			ok = matchString(d.HCTL, fmt.Sprint(v))
		case "rotational":
			var want bool
			want, err = parseBool(v)
			ok = d.Rotational == want
		default:
			// Hints we do not know (wwn_with_extension, ...) cannot be
			// honoured: refuse rather than write to the wrong disk.
			return false, fmt.Errorf("root device hint %q is not supported", k)
		}
		if err != nil {
			return false, fmt.Errorf("root device hint %s: %w", k, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func parseBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		return strconv.ParseBool(strings.TrimSpace(t))
	case float64:
		return t != 0, nil
	}
	return false, fmt.Errorf("%v is not a boolean", v)
}

// matchString compares case-insensitively; "s== x", "s!= x" and "<in> x"
// are Ironic's string operators.
func matchString(have, want string) bool {
	have = strings.ToLower(strings.TrimSpace(have))
	want = strings.ToLower(strings.TrimSpace(want))
	switch {
	case strings.HasPrefix(want, "s== "):
		return have == strings.TrimSpace(want[4:])
	case strings.HasPrefix(want, "s!= "):
		return have != strings.TrimSpace(want[4:])
	case strings.HasPrefix(want, "<in> "):
		return have != "" && strings.Contains(have, strings.TrimSpace(want[5:]))
	}
	return have == want
}

// matchSize accepts a number (GiB, equality) or "<op> N" with ==, !=, >=,
// <=, >, <.
func matchSize(haveGiB int64, v any) (bool, error) {
	op, numStr := "==", ""
	switch t := v.(type) {
	case float64:
		numStr = strconv.FormatInt(int64(t), 10)
	case int:
		numStr = strconv.Itoa(t)
	case int64:
		numStr = strconv.FormatInt(t, 10)
	case string:
		f := strings.Fields(t)
		switch len(f) {
		case 1:
			numStr = f[0]
		case 2:
			op, numStr = f[0], f[1]
		default:
			return false, fmt.Errorf("cannot parse %q", t)
		}
	default:
		return false, fmt.Errorf("cannot parse %v", v)
	}
	n, err := strconv.ParseInt(numStr, 10, 64)
	if err != nil {
		return false, fmt.Errorf("cannot parse %q as GiB", numStr)
	}
	switch op {
	case "==", "=":
		return haveGiB == n, nil
	case "!=":
		return haveGiB != n, nil
	case ">=":
		return haveGiB >= n, nil
	case "<=":
		return haveGiB <= n, nil
	case ">":
		return haveGiB > n, nil
	case "<":
		return haveGiB < n, nil
	}
	return false, fmt.Errorf("unknown operator %q", op)
}
