package bmo

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// HardwareDetails is the part of a BareMetalHost's status.hardware that
// BMO builds from the node's inventory (its hardwaredetails package).
type HardwareDetails struct {
	SystemVendor struct{ Manufacturer, ProductName, SerialNumber string }
	Firmware     struct{ BIOSVendor, BIOSVersion, BIOSDate string }
	RAMMebibytes int
	NIC          []NIC
	Storage      []Storage
	CPU          CPU
	Hostname     string
	// AllInterfaces is how many interfaces plugin_data's all_interfaces
	// lists (Ironic's inspection hooks fill it; BMO reads PXE flags there).
	AllInterfaces int
	// PluginDataError is why plugin_data did not decode as Ironic's
	// standard inspection data (BMO logs it and loses the NICs' PXE flags
	// and LLDP); "" when it did.
	PluginDataError string
}

// NIC is one address of one interface, as BMO lists them.
type NIC struct {
	Name, Model, MAC, IP, PCIAddress string
	SpeedGbps                        int
	PXE                              bool
	// LLDP is the switch port from plugin_data's parsed_lldp; nil when
	// none of its three names is there (BMO's getLLDPData).
	LLDP *LLDP
}

// LLDP is what BMO keeps of an interface's LLDP neighbour.
type LLDP struct {
	SwitchID, PortID, SwitchSystemName string
}

// lldpOf is BMO's getLLDPData: the switch's chassis ID, port ID and system
// name, nil when all three are missing or empty.
func lldpOf(parsed map[string]any) *LLDP {
	var l LLDP
	l.SwitchID, _ = parsed["switch_chassis_id"].(string)
	l.PortID, _ = parsed["switch_port_id"].(string)
	l.SwitchSystemName, _ = parsed["switch_system_name"].(string)
	if l == (LLDP{}) {
		return nil
	}
	return &l
}

// Storage is one disk.
type Storage struct {
	Name           string
	AlternateNames []string
	Rotational     bool
	// Type is HDD, SSD or NVME.
	Type                        string
	SizeBytes                   int64
	Vendor, Model, SerialNumber string
	WWN, HCTL                   string
}

// CPU is the processor summary.
type CPU struct {
	Arch, Model    string
	ClockMegahertz float64
	Count          int
	Flags          []string
}

// hardwareDetails builds the details from GET /v1/nodes/{node}/inventory
// the way BMO's GetHardwareDetails does: one NIC per address (an interface
// with neither address still counts once), PXE flags from plugin_data's
// all_interfaces, the switch port from its parsed_lldp, disk type from rotational and the /dev/nvme prefix, the
// disk's by_path as its name when set, the CPU frequency string rounded
// to whole MHz, CPU flags sorted.
func hardwareDetails(data *nodes.InventoryData) *HardwareDetails {
	d := &HardwareDetails{}
	std, err := data.PluginData.AsStandardData()
	if err != nil {
		d.PluginDataError = err.Error()
	}
	d.AllInterfaces = len(std.AllInterfaces)
	inv := data.Inventory
	d.Firmware.BIOSVendor, d.Firmware.BIOSVersion, d.Firmware.BIOSDate = inv.SystemVendor.Firmware.Vendor, inv.SystemVendor.Firmware.Version, inv.SystemVendor.Firmware.BuildDate
	d.SystemVendor.Manufacturer, d.SystemVendor.ProductName, d.SystemVendor.SerialNumber = inv.SystemVendor.Manufacturer, inv.SystemVendor.ProductName, inv.SystemVendor.SerialNumber
	d.RAMMebibytes = inv.Memory.PhysicalMb
	for _, intf := range inv.Interfaces {
		nic := NIC{Name: intf.Name, Model: strings.TrimLeft(intf.Vendor+" "+intf.Product, " "), MAC: intf.MACAddress,
			SpeedGbps: intf.SpeedMbps / 1000, PXE: std.AllInterfaces[intf.Name].PXEEnabled, PCIAddress: intf.PCIAddress,
			LLDP: lldpOf(std.ParsedLLDP[intf.Name])}
		if intf.IPV4Address != "" || intf.IPV6Address == "" {
			n := nic
			n.IP = intf.IPV4Address
			d.NIC = append(d.NIC, n)
		}
		if intf.IPV6Address != "" {
			n := nic
			n.IP = intf.IPV6Address
			d.NIC = append(d.NIC, n)
		}
	}
	for _, disk := range inv.Disks {
		d.Storage = append(d.Storage, storageOf(disk))
	}
	var freq float64
	fmt.Sscanf(inv.CPU.Frequency, "%f", &freq) //nolint:errcheck // BMO ignores a bad frequency too
	flags := append([]string(nil), inv.CPU.Flags...)
	sort.Strings(flags)
	d.CPU = CPU{Arch: inv.CPU.Architecture, Model: inv.CPU.ModelName, ClockMegahertz: math.Round(freq), Count: inv.CPU.Count, Flags: flags}
	d.Hostname = inv.Hostname
	return d
}

func storageOf(disk inventory.RootDiskType) Storage {
	name, all := disk.Name, []string{disk.Name}
	if disk.ByPath != "" {
		name = disk.ByPath
		all = append(all, name)
	}
	typ := "SSD"
	switch {
	case disk.Rotational:
		typ = "HDD"
	case strings.HasPrefix(disk.Name, "/dev/nvme"):
		typ = "NVME"
	}
	return Storage{Name: name, AlternateNames: all, Rotational: disk.Rotational, Type: typ, SizeBytes: disk.Size,
		Vendor: disk.Vendor, Model: disk.Model, SerialNumber: disk.Serial, WWN: disk.Wwn, HCTL: disk.Hctl}
}
