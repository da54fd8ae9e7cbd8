package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
)

// DefaultUEFILoader is the removable-media path every whole-disk UEFI image
// carries.
const DefaultUEFILoader = `\EFI\BOOT\BOOTX64.EFI`

// ErrNotUEFI is returned by Hardware.AddUEFIBootEntry on a BIOS machine.
var ErrNotUEFI = errors.New("machine did not boot in UEFI mode")

// findESP locates the EFI system partition of the disk.
func findESP(dev Device) (UEFIPartition, error) {
	if t := readGPT(dev); t != nil {
		for _, p := range t.Partitions {
			if p.Type == gpt.EFISystemPartition {
				return UEFIPartition{Number: p.Index, StartLBA: p.Start, SizeLBA: p.End - p.Start + 1, GPT: true, PartGUID: p.GUID}, nil
			}
		}
		return UEFIPartition{}, errors.New("the GPT has no EFI system partition")
	}
	if t := readMBR(dev); t != nil {
		sig := make([]byte, 4)
		if _, err := dev.ReadAt(sig, 440); err != nil {
			return UEFIPartition{}, fmt.Errorf("read MBR disk signature: %w", err)
		}
		for i, p := range t.Partitions {
			if p.Type == mbr.EFISystem {
				return UEFIPartition{Number: i + 1, StartLBA: uint64(p.Start), SizeLBA: uint64(p.Size),
					MBRDiskSig: uint32(sig[0]) | uint32(sig[1])<<8 | uint32(sig[2])<<16 | uint32(sig[3])<<24}, nil
			}
		}
		return UEFIPartition{}, errors.New("the MBR has no EFI system partition (type ef)")
	}
	return UEFIPartition{}, errors.New("the disk has no partition table")
}

// installBootloader is image.install_bootloader. For whole-disk images, on a
// UEFI machine it registers the image's removable-media loader as the first
// boot entry, so the machine boots the disk even if the firmware does not
// scan it; on BIOS the image's own boot code is all there is. Partition
// images get systemd-boot or GRUB (partition_boot.go).
func (a *Agent) installBootloader(ctx context.Context, _ *command, raw json.RawMessage) (any, error) {
	var p struct {
		TargetBootMode string `json:"target_boot_mode"`
		Loader         string `json:"efi_loader"`
		IgnoreFailure  bool   `json:"ignore_bootloader_failure"`
		// SecureBoot: the instance boots with secure boot on; its loader
		// must be signed (agent/secureboot.go). Not ignored by
		// ignore_bootloader_failure.
		SecureBoot bool `json:"secure_boot"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if node := a.nodeOrLookup(nil); isPartitionImage(node, nil) {
		return a.installBootloaderOfPartitionImage(ctx, node, strings.ToLower(p.TargetBootMode), p.SecureBoot)
	}
	loader := p.Loader
	if loader == "" {
		loader = DefaultUEFILoader
	}
	if root, ok := softwareRAIDRoot(a.nodeOrLookup(nil)); ok {
		return a.installBootloaderOnRAID(ctx, root, strings.ToLower(p.TargetBootMode), loader, p.SecureBoot) // agent/raid_deploy.go
	}
	if strings.EqualFold(p.TargetBootMode, "bios") {
		return "BIOS boot mode: nothing to install", nil
	}
	bd, err := a.rootDevice(ctx, a.nodeOrLookup(nil))
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	dev, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: open %s: %w", bd.Name, err)
	}
	defer dev.Close()
	esp, err := findESP(dev)
	if err != nil {
		if strings.EqualFold(p.TargetBootMode, "uefi") && !p.IgnoreFailure {
			return nil, fmt.Errorf("install bootloader on %s: %w", bd.Name, err)
		}
		return fmt.Sprintf("no EFI system partition on %s: relying on the image's own boot code", bd.Name), nil
	}
	signed := ""
	if p.SecureBoot {
		if signed, err = verifySecureBootLoader(dev, bd.Name, esp, loader); err != nil {
			return nil, err
		}
		signed = "; secure boot: " + signed
	}
	err = a.cfg.Hardware.AddUEFIBootEntry(ctx, bd, esp, loader)
	switch {
	case errors.Is(err, ErrNotUEFI):
		return "BIOS boot mode: nothing to install" + signed, nil
	case err != nil && p.IgnoreFailure:
		a.log.Warn("adding the UEFI boot entry failed; ignored as asked", "err", err)
		return "UEFI boot entry failed (ignored): " + err.Error() + signed, nil
	case err != nil:
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	return fmt.Sprintf("UEFI boot entry added for %s on %s partition %d%s", loader, bd.Name, esp.Number, signed), nil
}
