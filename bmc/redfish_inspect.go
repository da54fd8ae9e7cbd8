package bmc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/stmcginnis/gofish/common"

	agentclient "github.com/ironflow/ironflow/agent/client"
)

// rfStatus is the Status every Redfish resource carries; State "Absent"
// marks an empty slot or bay.
type rfStatus struct {
	State string
}

func (s rfStatus) present() bool {
	return s.State != "Absent" && s.State != "Disabled" && s.State != "UnavailableOffline"
}

// Inspect reads the hardware from the ComputerSystem and the collections it
// links (Processors, Memory, SimpleStorage, Storage, EthernetInterfaces).
// Many BMCs leave some collections out or answer 404 for them (the iLO
// recording links Processors but serves none): a missing collection is
// logged and the system's summaries are used instead. Authentication and
// connection failures end the inspection, since a later attempt can do better.
func (d *redfishDriver) Inspect(ctx context.Context) (agentclient.Inventory, error) {
	c, err := d.call(ctx)
	if err != nil {
		return agentclient.Inventory{}, err
	}
	uri, err := d.resolveSystem(c)
	if err != nil {
		return agentclient.Inventory{}, fmt.Errorf("inspect via redfish %s: %w", d.cfg.endpoint, err)
	}
	var sys struct {
		Manufacturer, Model, SerialNumber string
		ProcessorSummary                  struct {
			Count, LogicalProcessorCount int
			Model                        string
		}
		MemorySummary struct{ TotalSystemMemoryGiB float64 }
		Boot          struct{ BootSourceOverrideMode string }

		Processors, Memory, SimpleStorage, Storage, EthernetInterfaces common.Link
	}
	if err := getJSON(c, uri, &sys); err != nil {
		return agentclient.Inventory{}, fmt.Errorf("inspect via redfish %s: read system %s: %w", d.cfg.endpoint, uri, err)
	}
	inv := agentclient.Inventory{
		SystemVendor: agentclient.SystemVendor{
			Manufacturer: strings.TrimSpace(sys.Manufacturer),
			ProductName:  strings.TrimSpace(sys.Model),
			SerialNumber: strings.TrimSpace(sys.SerialNumber),
		},
		Disks:      []agentclient.Disk{},
		Interfaces: []agentclient.Interface{},
	}
	switch sys.Boot.BootSourceOverrideMode {
	case "UEFI":
		inv.Boot.CurrentBootMode = "uefi"
	case "Legacy":
		inv.Boot.CurrentBootMode = "bios"
	}

	steps := []struct {
		what string
		link common.Link
		read func(c *rfCall, uri string, inv *agentclient.Inventory) error
	}{
		{"processors", sys.Processors, inspectProcessors},
		{"memory", sys.Memory, inspectMemory},
		{"simple storage", sys.SimpleStorage, inspectSimpleStorage},
		{"storage", sys.Storage, inspectStorage},
		{"ethernet interfaces", sys.EthernetInterfaces, inspectInterfaces},
	}
	for _, s := range steps {
		if s.link == "" {
			continue
		}
		if err := s.read(c, s.link.String(), &inv); err != nil {
			if !errors.Is(err, ErrUnsupported) {
				return agentclient.Inventory{}, fmt.Errorf("inspect %s via redfish %s: %w", s.what, d.cfg.endpoint, err)
			}
			d.log.Warn("BMC does not serve a linked collection; using the system summary", "collection", s.what, "error", err)
		}
	}

	// Summaries fill what the collections did not.
	if inv.CPU.Count == 0 {
		inv.CPU.Count = sys.ProcessorSummary.LogicalProcessorCount
		if inv.CPU.Count == 0 {
			inv.CPU.Count = sys.ProcessorSummary.Count
		}
	}
	if inv.CPU.ModelName == "" {
		inv.CPU.ModelName = strings.TrimSpace(sys.ProcessorSummary.Model)
	}
	if inv.Memory.PhysicalMB == 0 {
		inv.Memory.PhysicalMB = int64(math.Round(sys.MemorySummary.TotalSystemMemoryGiB * 1024))
	}
	inv.Memory.Total = inv.Memory.PhysicalMB << 20
	return inv, nil
}

// cpuArchitecture maps Redfish's InstructionSet (preferred: it names the
// word size) or ProcessorArchitecture to the kernel's machine names that IPA
// reports.
func cpuArchitecture(instructionSet, arch string) string {
	switch instructionSet {
	case "x86-64":
		return "x86_64"
	case "x86":
		return "i686"
	case "IA-64":
		return "ia64"
	case "ARM-A64":
		return "aarch64"
	case "ARM-A32":
		return "armv7l"
	case "PowerISA":
		return "ppc64le"
	case "MIPS64":
		return "mips64"
	case "RV64":
		return "riscv64"
	}
	switch arch {
	case "x86":
		return "x86_64" // as Ironic's redfish inspect maps it
	case "IA-64":
		return "ia64"
	case "ARM":
		return "aarch64"
	case "Power":
		return "ppc64le"
	case "MIPS":
		return "mips64"
	}
	return ""
}

// inspectProcessors counts threads of the present CPUs (not GPUs, FPGAs or
// empty sockets), as sushy's processor summary does.
func inspectProcessors(c *rfCall, uri string, inv *agentclient.Inventory) error {
	members, err := collectionMembers(c, uri)
	if err != nil {
		return err
	}
	for _, m := range members {
		var p struct {
			ProcessorType, ProcessorArchitecture, InstructionSet, Model string
			TotalCores, TotalThreads                                    int
			Status                                                      rfStatus
		}
		if err := getJSON(c, m, &p); err != nil {
			return err
		}
		if (p.ProcessorType != "" && p.ProcessorType != "CPU") || !p.Status.present() {
			continue
		}
		threads := p.TotalThreads
		if threads == 0 {
			threads = p.TotalCores
		}
		inv.CPU.Count += threads
		if inv.CPU.Architecture == "" {
			inv.CPU.Architecture = cpuArchitecture(p.InstructionSet, p.ProcessorArchitecture)
		}
		if inv.CPU.ModelName == "" {
			inv.CPU.ModelName = strings.TrimSpace(p.Model)
		}
	}
	return nil
}

func inspectMemory(c *rfCall, uri string, inv *agentclient.Inventory) error {
	members, err := collectionMembers(c, uri)
	if err != nil {
		return err
	}
	for _, m := range members {
		var dimm struct {
			CapacityMiB int64
			Status      rfStatus
		}
		if err := getJSON(c, m, &dimm); err != nil {
			return err
		}
		if dimm.Status.present() {
			inv.Memory.PhysicalMB += dimm.CapacityMiB
		}
	}
	return nil
}

func inspectSimpleStorage(c *rfCall, uri string, inv *agentclient.Inventory) error {
	members, err := collectionMembers(c, uri)
	if err != nil {
		return err
	}
	for _, m := range members {
		var ss struct {
			Devices []struct {
				Name, Model   string
				CapacityBytes int64
				Status        rfStatus
			}
		}
		if err := getJSON(c, m, &ss); err != nil {
			return err
		}
		for _, dev := range ss.Devices {
			if dev.Status.present() && dev.CapacityBytes > 0 {
				inv.Disks = append(inv.Disks, agentclient.Disk{Name: dev.Name, Size: dev.CapacityBytes, Model: strings.TrimSpace(dev.Model)})
			}
		}
	}
	return nil
}

// inspectStorage follows Storage → Drives. A drive already listed by
// SimpleStorage (same name and size) is not listed twice.
func inspectStorage(c *rfCall, uri string, inv *agentclient.Inventory) error {
	members, err := collectionMembers(c, uri)
	if err != nil {
		return err
	}
	for _, m := range members {
		var st struct{ Drives common.Links }
		if err := getJSON(c, m, &st); err != nil {
			return err
		}
		for _, l := range st.Drives {
			var dr struct {
				Id, Name, Model, SerialNumber, MediaType string
				CapacityBytes                            int64
				RotationSpeedRPM                         float64
				Status                                   rfStatus
			}
			if err := getJSON(c, l.String(), &dr); err != nil {
				return err
			}
			if !dr.Status.present() || dr.CapacityBytes <= 0 {
				continue
			}
			name := dr.Name
			if name == "" {
				name = dr.Id
			}
			disk := agentclient.Disk{Name: name, Size: dr.CapacityBytes, Model: strings.TrimSpace(dr.Model),
				Serial: strings.TrimSpace(dr.SerialNumber), Rotational: dr.MediaType == "HDD" || dr.RotationSpeedRPM > 0}
			dup := false
			for i, have := range inv.Disks {
				if have.Name == disk.Name && have.Size == disk.Size {
					inv.Disks[i] = disk // Storage knows more (serial, media type)
					dup = true
				}
			}
			if !dup {
				inv.Disks = append(inv.Disks, disk)
			}
		}
	}
	return nil
}

// inspectInterfaces lists physical ports once each. VLAN interfaces repeat
// their parent's MAC, and the host interface to the BMC is no network port
// a machine can boot from, so neither becomes an Ironic port.
func inspectInterfaces(c *rfCall, uri string, inv *agentclient.Inventory) error {
	members, err := collectionMembers(c, uri)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range members {
		var nic struct {
			Id, MACAddress, PermanentMACAddress, EthernetInterfaceType string
			Status                                                     rfStatus
			Links                                                      struct{ HostInterface common.Link }
		}
		if err := getJSON(c, m, &nic); err != nil {
			return err
		}
		mac := strings.ToLower(nic.MACAddress)
		if mac == "" {
			mac = strings.ToLower(nic.PermanentMACAddress)
		}
		if mac == "" || nic.EthernetInterfaceType == "Virtual" || nic.Links.HostInterface != "" || !nic.Status.present() || seen[mac] {
			continue
		}
		seen[mac] = true
		inv.Interfaces = append(inv.Interfaces, agentclient.Interface{Name: nic.Id, MACAddress: mac})
	}
	return nil
}
