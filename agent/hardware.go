package agent

import (
	"context"
	"io"

	"github.com/ironflow/ironflow/agent/client"
)

// BlockDevice describes a disk the agent may deploy onto or erase.
type BlockDevice struct {
	// Name is the device path, e.g. /dev/vda.
	Name       string
	Size       int64
	Rotational bool
	Model      string
	Vendor     string
	Serial     string
	WWN        string
	// ByPath is the /dev/disk/by-path link, e.g. /dev/disk/by-path/pci-0000:00:04.0.
	ByPath string
	HCTL   string
	// Removable, ReadOnly and Virtual (loop, ram, CD, the ramdisk's own
	// medium) devices are never chosen as a root device.
	Removable bool
	ReadOnly  bool
	Kind      string // "disk", "cdrom", "loop", ...
}

// Device is an open disk.
type Device interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Size is the device size in bytes.
	Size() int64
	// Sync flushes written data to stable storage.
	Sync() error
}

// PowerAction is what standby.power_off / standby.reboot ask of the machine.
type PowerAction string

// Power actions.
const (
	PowerOff PowerAction = "off"
	Reboot   PowerAction = "reboot"
)

// Hardware is the machine the agent runs on.
type Hardware interface {
	// BlockDevices lists the machine's disks.
	BlockDevices(ctx context.Context) ([]BlockDevice, error)
	// Open opens a disk for reading and writing.
	Open(dev BlockDevice) (Device, error)
	// Inventory describes the machine in IPA's inventory shape.
	Inventory(ctx context.Context) (client.Inventory, error)
	// Power powers the machine off or reboots it; on real hardware it does
	// not return on success.
	Power(ctx context.Context, action PowerAction) error
	// SyncAll flushes all filesystems and disks (sync(2)).
	SyncAll() error
	// AddUEFIBootEntry registers a UEFI boot entry for loader (a path on the
	// EFI system partition, e.g. \EFI\BOOT\BOOTX64.EFI) on the given
	// partition and puts it first in BootOrder. It returns ErrNotUEFI when
	// the machine booted in BIOS mode.
	AddUEFIBootEntry(ctx context.Context, dev BlockDevice, part UEFIPartition, loader string) error
}

// UEFIPartition locates an EFI system partition for a boot entry.
type UEFIPartition struct {
	Number     int
	StartLBA   uint64
	SizeLBA    uint64
	GPT        bool
	PartGUID   string // GPT partition GUID (or MBR signature-based id)
	MBRDiskSig uint32
}
