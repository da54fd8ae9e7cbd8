package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
)

// signatureWipe is zeroed at the start and end of every partition: it covers
// filesystem superblocks (ext4 at 1 KiB, XFS at 0, btrfs at 64 KiB) and RAID
// metadata at either end (md 1.1/1.2 at the start, 0.90/1.0 at the end).
const signatureWipe = 1 << 20

// eraseTargets are the disks cleaning touches: every writable, fixed disk.
// Removable devices are left alone: virtual media (the ramdisk's own USB
// stick) shows up as one.
func (a *Agent) eraseTargets(ctx context.Context) ([]BlockDevice, error) {
	devs, err := a.cfg.Hardware.BlockDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list disks: %w", err)
	}
	var out []BlockDevice
	for _, d := range devs {
		if (d.Kind == "" || d.Kind == "disk") && !d.ReadOnly && !d.Removable {
			out = append(out, d)
		}
	}
	return out, nil
}

// partitionExtents lists (start, size) in bytes of the disk's partitions.
func partitionExtents(dev Device) [][2]int64 {
	var out [][2]int64
	if t := readGPT(dev); t != nil {
		for _, p := range t.Partitions {
			if p.Type != gpt.Unused {
				out = append(out, [2]int64{int64(p.Start) * sectorSize, int64(p.End-p.Start+1) * sectorSize})
			}
		}
		return out
	}
	if t := readMBR(dev); t != nil {
		for _, p := range t.Partitions {
			if p.Type != mbr.Empty && p.Size > 0 {
				out = append(out, [2]int64{int64(p.Start) * sectorSize, int64(p.Size) * sectorSize})
			}
		}
	}
	return out
}

// eraseMetadata removes what makes a disk recognisable: filesystem and RAID
// signatures at both ends of each partition, then both partition tables.
func eraseMetadata(dev Device) error {
	size := dev.Size()
	zero := make([]byte, signatureWipe)
	for _, e := range partitionExtents(dev) {
		start, psize := e[0], e[1]
		if start >= size {
			continue
		}
		n := min(int64(signatureWipe), psize, size-start)
		if _, err := dev.WriteAt(zero[:n], start); err != nil {
			return fmt.Errorf("wipe signatures at partition start %d: %w", start, err)
		}
		if end := min(start+psize, size); end-n > start {
			if _, err := dev.WriteAt(zero[:n], end-n); err != nil {
				return fmt.Errorf("wipe signatures at partition end %d: %w", end, err)
			}
		}
	}
	return wipeEnds(dev)
}

func (a *Agent) eraseDevicesMetadata(ctx context.Context, _ *command) (any, error) {
	devs, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	var done []string
	for _, bd := range devs {
		dev, err := a.cfg.Hardware.Open(bd)
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", bd.Name, err))
			continue
		}
		if err := eraseMetadata(dev); err != nil {
			errs = append(errs, fmt.Errorf("erase metadata of %s: %w", bd.Name, err))
		} else {
			done = append(done, bd.Name)
		}
		dev.Close()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	a.log.Info("erased disk metadata", "node", a.NodeUUID(), "disks", done)
	return map[string]any{"erased": done}, nil
}
