package vbmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The Redfish resources out-of-band inspection reads (Processors, Memory,
// SimpleStorage) describe the VM's configuration and its disk file, so they
// answer without QEMU running, as a real BMC answers for a powered-off server.

// diskInfoTimeout bounds qemu-img info on a disk another QEMU holds open.
const diskInfoTimeout = 10 * time.Second

// systemResource is a collection under the system with one member, which
// is all a VM needs: one CPU socket, one DIMM, one NIC, one disk controller.
type systemResource struct {
	collection, collectionType, collectionName string
	member                                     string
	// doc is the member's document; @odata.id and Id are added.
	doc func(ctx context.Context, m *Machine) (map[string]any, error)
}

var systemResources = []systemResource{
	{"EthernetInterfaces", "#EthernetInterfaceCollection.EthernetInterfaceCollection", "Ethernet Interface Collection", "nic0", nicDoc},
	{"Processors", "#ProcessorCollection.ProcessorCollection", "Processors Collection", "CPU0", processorDoc},
	{"Memory", "#MemoryCollection.MemoryCollection", "Memory Module Collection", "DIMM0", memoryDoc},
	{"SimpleStorage", "#SimpleStorageCollection.SimpleStorageCollection", "Simple Storage Collection", "1", simpleStorageDoc},
}

// routeSystemResources serves each systemResource's collection and member.
func (s *Server) routeSystemResources(mux *http.ServeMux) {
	for _, res := range systemResources {
		base := redfishRoot + "/Systems/{id}/" + res.collection
		mux.HandleFunc("GET "+base, s.withMachine(func(w http.ResponseWriter, r *http.Request, m *Machine) {
			p := redfishRoot + "/Systems/" + m.vm.Name + "/" + res.collection
			writeJSONResponse(w, http.StatusOK, collection(p, res.collectionType, res.collectionName, []string{p + "/" + res.member}))
		}))
		mux.HandleFunc("GET "+base+"/{member}", s.withMachine(func(w http.ResponseWriter, r *http.Request, m *Machine) {
			if r.PathValue("member") != res.member {
				writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such resource in "+res.collection+".")
				return
			}
			doc, err := res.doc(r.Context(), m)
			if err != nil {
				s.log.Warn("cannot describe a system resource", "vm", m.vm.Name, "resource", res.collection, "error", err)
				writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
				return
			}
			doc[odataID] = redfishRoot + "/Systems/" + m.vm.Name + "/" + res.collection + "/" + res.member
			doc["Id"] = res.member
			writeJSONResponse(w, http.StatusOK, doc)
		}))
	}
}

func nicDoc(_ context.Context, m *Machine) (map[string]any, error) {
	return map[string]any{
		odataType:               "#EthernetInterface.v1_6_0.EthernetInterface",
		"Name":                  "virtio-net-pci",
		"MACAddress":            strings.ToLower(m.vm.MAC),
		"PermanentMACAddress":   strings.ToLower(m.vm.MAC),
		"InterfaceEnabled":      true,
		"LinkStatus":            "LinkUp",
		"Status":                okStatus(),
		"EthernetInterfaceType": "Physical",
	}, nil
}

// processorDoc describes the VM's vCPUs as one socket: QEMU's default
// topology for -smp N is N sockets of one core, but inspection counts
// threads either way.
func processorDoc(_ context.Context, m *Machine) (map[string]any, error) {
	return map[string]any{
		odataType:               "#Processor.v1_17_0.Processor",
		"Name":                  "Processor",
		"Socket":                "CPU 0",
		"ProcessorType":         "CPU",
		"ProcessorArchitecture": "x86",
		"InstructionSet":        "x86-64",
		"Manufacturer":          "QEMU",
		"Model":                 "QEMU Virtual CPU",
		"TotalCores":            m.vm.CPUs,
		"TotalThreads":          m.vm.CPUs,
		"Status":                okStatus(),
	}, nil
}

func memoryDoc(_ context.Context, m *Machine) (map[string]any, error) {
	return map[string]any{
		odataType:          "#Memory.v1_17_0.Memory",
		"Name":             "DIMM Slot 0",
		"CapacityMiB":      m.vm.MemoryMB,
		"MemoryType":       "DRAM",
		"MemoryDeviceType": "DDR4",
		"Status":           okStatus(),
	}, nil
}

// simpleStorageDoc lists the virtio-blk disk with the size the guest sees.
// A VM without a disk has a controller with no devices.
func simpleStorageDoc(ctx context.Context, m *Machine) (map[string]any, error) {
	devices := []any{}
	if m.vm.Disk != "" {
		size, err := diskBytes(ctx, m.vm)
		if err != nil {
			return nil, fmt.Errorf("size disk of %s: %w", m.vm.Name, err)
		}
		if size > 0 {
			devices = append(devices, map[string]any{
				"Name":          "disk0",
				"Manufacturer":  "QEMU",
				"Model":         "virtio-blk",
				"CapacityBytes": size,
				"Status":        okStatus(),
			})
		}
	}
	return map[string]any{
		odataType: "#SimpleStorage.v1_3_1.SimpleStorage",
		"Name":    "Simple Storage Controller",
		"Status":  okStatus(),
		"Devices": devices,
	}, nil
}

// diskBytes is the disk's size as the guest sees it: qemu-img's
// virtual-size (a qcow2 file is smaller than its disk), the file size if
// qemu-img cannot read it, or disk_size when the disk is not created yet
// (the first power on creates it with that size). Zero means no disk.
func diskBytes(ctx context.Context, vm VM) (int64, error) {
	st, err := os.Stat(vm.Disk)
	if errors.Is(err, fs.ErrNotExist) {
		if vm.DiskSize == "" {
			return 0, nil
		}
		return parseQEMUSize(vm.DiskSize)
	}
	if err != nil {
		return 0, fmt.Errorf("stat disk: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, diskInfoTimeout)
	defer cancel()
	// -U: the VM's QEMU holds a write lock on the file while it runs.
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "--output=json", "-f", diskFormat(vm.Disk), vm.Disk).Output()
	if err == nil {
		var info struct {
			VirtualSize int64 `json:"virtual-size"`
		}
		if err := json.Unmarshal(out, &info); err == nil && info.VirtualSize > 0 {
			return info.VirtualSize, nil
		}
	}
	if diskFormat(vm.Disk) == "raw" {
		return st.Size(), nil
	}
	return 0, fmt.Errorf("qemu-img info %s: %v", vm.Disk, err)
}

// parseQEMUSize reads a size as qemu-img create takes it: a number of bytes
// with an optional binary suffix k, M, G, T (1024-based), case-insensitive.
func parseQEMUSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	if n := len(s); n > 0 {
		switch strings.ToUpper(s[n-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		case "B":
			mult = 1
		}
		if mult != 1 || strings.EqualFold(s[n-1:], "B") {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("disk_size %q is not a size like 1G", s)
	}
	return int64(v * float64(mult)), nil
}
