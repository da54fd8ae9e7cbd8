package sim

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/client"
)

// keep is how much of each end of a simulated disk is kept in memory:
// enough for MBR/GPT tables and their backups, so partition-table work
// (config drive, erase) behaves as on a real disk.
const keep = 1 << 20

// Hardware is simulated hardware: disks that remember only their first and
// last MiB, a power switch that stops the agent.
type Hardware struct {
	mu      sync.Mutex
	macs    []string
	disks   []*Disk
	onPower func(agent.PowerAction)
	// Powered records power actions requested.
	power []agent.PowerAction
	// rescueHash is the rescue user's password hash.
	rescueHash string
}

// NewHardware returns simulated hardware with one disk of diskSize bytes.
func NewHardware(macs []string, diskSize int64) *Hardware {
	return &Hardware{macs: macs, disks: []*Disk{{name: "/dev/vda", size: diskSize}}}
}

// Disk is a simulated disk.
type Disk struct {
	mu      sync.Mutex
	name    string
	size    int64
	head    []byte
	tail    []byte
	written int64
	// chunks, when set, keep every byte written (in chunkSize pieces), in
	// place of head and tail: a partition image's boot partition and root
	// lie beyond the first MiB.
	chunks map[int64][]byte
	// isoWrites counts writes of an ISO 9660 image (a config drive).
	isoWrites int
}

// chunkSize is the piece a disk that keeps every write stores.
const chunkSize = 64 << 10

// KeepWrites makes the hardware's disks remember every byte written (as a
// sparse file would), not only their ends; for deploys that read back what
// they wrote anywhere on the disk.
func (h *Hardware) KeepWrites() {
	for _, d := range h.disks {
		d.mu.Lock()
		if d.chunks == nil {
			d.chunks = map[int64][]byte{}
		}
		d.mu.Unlock()
	}
}

// writeChunks and readChunks are WriteAt and ReadAt of a disk that keeps
// every write; d.mu is held.
func (d *Disk) writeChunks(p []byte, off int64) {
	for len(p) > 0 {
		base := off - off%chunkSize
		c := d.chunks[base]
		if c == nil {
			c = make([]byte, chunkSize)
			d.chunks[base] = c
		}
		n := copy(c[off-base:], p)
		p, off = p[n:], off+int64(n)
	}
}

func (d *Disk) readChunks(p []byte, off int64) {
	for len(p) > 0 {
		base := off - off%chunkSize
		n := min(len(p), int(base+chunkSize-off))
		if c := d.chunks[base]; c != nil {
			copy(p[:n], c[off-base:])
		}
		p, off = p[n:], off+int64(n)
	}
}

// isoMagic is ISO 9660's volume descriptor identifier, at byte 32769 of an
// image (ECMA-119): the config drive is one.
const (
	isoMagic       = "CD001"
	isoMagicOffset = 32769
)

// ConfigDriveWrites is how many times an ISO 9660 image (the config drive)
// was written to the disk.
func (d *Disk) ConfigDriveWrites() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isoWrites
}

// BytesWritten is how many bytes were written to the disk in total.
func (d *Disk) BytesWritten() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

// Disks returns the simulated disks.
func (h *Hardware) Disks() []*Disk { return h.disks }

// PowerActions returns the power actions requested so far.
func (h *Hardware) PowerActions() []agent.PowerAction {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]agent.PowerAction(nil), h.power...)
}

// BlockDevices implements agent.Hardware.
func (h *Hardware) BlockDevices(context.Context) ([]agent.BlockDevice, error) {
	var out []agent.BlockDevice
	for i, d := range h.disks {
		out = append(out, agent.BlockDevice{Name: d.name, Size: d.size, Kind: "disk", Model: "SIMULATED DISK",
			Serial: fmt.Sprintf("SIM%04d", i), ByPath: fmt.Sprintf("/dev/disk/by-path/pci-0000:00:%02x.0", 4+i)})
	}
	return out, nil
}

// Open implements agent.Hardware.
func (h *Hardware) Open(bd agent.BlockDevice) (agent.Device, error) {
	for _, d := range h.disks {
		if d.name == bd.Name {
			return &openDisk{d}, nil
		}
	}
	return nil, fmt.Errorf("simulated disk %s does not exist", bd.Name)
}

// Inventory implements agent.Hardware.
func (h *Hardware) Inventory(context.Context) (client.Inventory, error) {
	inv := client.Inventory{
		CPU:          client.CPU{ModelName: "Simulated CPU", Count: 2, Architecture: "x86_64"},
		Memory:       client.Memory{Total: 2 << 30, PhysicalMB: 2048},
		SystemVendor: client.SystemVendor{Manufacturer: "ironflow", ProductName: "simulated machine", SerialNumber: "SIM"},
		Boot:         client.Boot{CurrentBootMode: "bios"},
	}
	for i, m := range h.macs {
		inv.Interfaces = append(inv.Interfaces, client.Interface{Name: fmt.Sprintf("eth%d", i), MACAddress: m, HasCarrier: new(true)})
	}
	devs, _ := h.BlockDevices(context.Background())
	for _, d := range devs {
		inv.Disks = append(inv.Disks, client.Disk{Name: d.Name, Size: d.Size, Model: d.Model, Serial: d.Serial, ByPath: d.ByPath})
	}
	return inv, nil
}

// Power implements agent.Hardware: the simulated machine stops its agent.
func (h *Hardware) Power(_ context.Context, action agent.PowerAction) error {
	h.mu.Lock()
	h.power = append(h.power, action)
	f := h.onPower
	h.mu.Unlock()
	if f != nil {
		f(action)
	}
	return nil
}

// SetRescueUser implements agent.Rescuer: the simulated machine keeps the
// rescue user's password hash (RescueHash).
func (h *Hardware) SetRescueUser(_ context.Context, hash string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rescueHash = hash
	return nil
}

// RescueHash is the crypt hash finalize_rescue set for the rescue user
// ("" before).
func (h *Hardware) RescueHash() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rescueHash
}

// Simulated implements agent.Simulator: burn-ins do a token amount of
// work here and test only what the simulated disks keep.
func (h *Hardware) Simulated() bool { return true }

// ErasePstore implements agent.PstoreEraser: the simulated machine keeps
// no crash records.
func (h *Hardware) ErasePstore(context.Context) ([]string, error) { return []string{}, nil }

// SyncAll implements agent.Hardware.
func (h *Hardware) SyncAll() error { return nil }

// AddUEFIBootEntry implements agent.Hardware: the simulated machine boots BIOS.
func (h *Hardware) AddUEFIBootEntry(context.Context, agent.BlockDevice, agent.UEFIPartition, string) error {
	return agent.ErrNotUEFI
}

type openDisk struct{ *Disk }

func (d *openDisk) Size() int64  { return d.size }
func (d *openDisk) Sync() error  { return nil }
func (d *openDisk) Close() error { return nil }

func (d *openDisk) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.size {
		return 0, fmt.Errorf("simulated disk %s: write of %d bytes at %d beyond its %d bytes", d.name, len(p), off, d.size)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written += int64(len(p))
	if len(p) >= isoMagicOffset+len(isoMagic) && string(p[isoMagicOffset:isoMagicOffset+len(isoMagic)]) == isoMagic {
		d.isoWrites++
	}
	if d.chunks != nil {
		d.writeChunks(p, off)
		return len(p), nil
	}
	if off < keep {
		if d.head == nil {
			d.head = make([]byte, min(keep, d.size))
		}
		copy(d.head[off:], p)
	}
	tailStart := d.size - keep
	if end := off + int64(len(p)); end > tailStart {
		if d.tail == nil {
			d.tail = make([]byte, min(keep, d.size))
		}
		if off >= tailStart {
			copy(d.tail[off-tailStart:], p)
		} else {
			copy(d.tail, p[tailStart-off:])
		}
	}
	return len(p), nil
}

func (d *openDisk) ReadAt(p []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, io.EOF
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := min(int64(len(p)), d.size-off)
	clear(p[:n])
	if d.chunks != nil {
		d.readChunks(p[:n], off)
		if n < int64(len(p)) {
			return int(n), io.EOF
		}
		return int(n), nil
	}
	if off < keep && d.head != nil {
		copy(p[:n], d.head[off:])
	}
	tailStart := d.size - keep
	if off+n > tailStart && d.tail != nil {
		if off >= tailStart {
			copy(p[:n], d.tail[off-tailStart:])
		} else {
			copy(p[tailStart-off:n], d.tail)
		}
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}
