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

func (s *Server) handleProcessors(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := redfishRoot + "/Systems/" + m.vm.Name + "/Processors"
	writeJSONResponse(w, http.StatusOK, collection(p, "#ProcessorCollection.ProcessorCollection", "Processors Collection", []string{p + "/CPU0"}))
}

// handleProcessor describes the VM's vCPUs as one socket: QEMU's default
// topology for -smp N is N sockets of one core, but inspection counts
// threads either way.
func (s *Server) handleProcessor(w http.ResponseWriter, r *http.Request, m *Machine) {
	if r.PathValue("cpu") != "CPU0" {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such processor.")
		return
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID:                 redfishRoot + "/Systems/" + m.vm.Name + "/Processors/CPU0",
		odataType:               "#Processor.v1_17_0.Processor",
		"Id":                    "CPU0",
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
	})
}

func (s *Server) handleMemoryCollection(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := redfishRoot + "/Systems/" + m.vm.Name + "/Memory"
	writeJSONResponse(w, http.StatusOK, collection(p, "#MemoryCollection.MemoryCollection", "Memory Module Collection", []string{p + "/DIMM0"}))
}

func (s *Server) handleMemory(w http.ResponseWriter, r *http.Request, m *Machine) {
	if r.PathValue("dimm") != "DIMM0" {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such memory module.")
		return
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID:            redfishRoot + "/Systems/" + m.vm.Name + "/Memory/DIMM0",
		odataType:          "#Memory.v1_17_0.Memory",
		"Id":               "DIMM0",
		"Name":             "DIMM Slot 0",
		"CapacityMiB":      m.vm.MemoryMB,
		"MemoryType":       "DRAM",
		"MemoryDeviceType": "DDR4",
		"Status":           okStatus(),
	})
}

func (s *Server) handleSimpleStorages(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := redfishRoot + "/Systems/" + m.vm.Name + "/SimpleStorage"
	writeJSONResponse(w, http.StatusOK, collection(p, "#SimpleStorageCollection.SimpleStorageCollection", "Simple Storage Collection", []string{p + "/1"}))
}

// handleSimpleStorage lists the virtio-blk disk with the size the guest
// sees. A VM without a disk has a controller with no devices.
func (s *Server) handleSimpleStorage(w http.ResponseWriter, r *http.Request, m *Machine) {
	if r.PathValue("ctl") != "1" {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such storage controller.")
		return
	}
	devices := []any{}
	if m.vm.Disk != "" {
		size, err := diskBytes(r.Context(), m.vm)
		if err != nil {
			s.log.Warn("cannot size the VM's disk", "vm", m.vm.Name, "disk", m.vm.Disk, "error", err)
			writeError(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("size disk of %s: %v", m.vm.Name, err))
			return
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
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID:   redfishRoot + "/Systems/" + m.vm.Name + "/SimpleStorage/1",
		odataType: "#SimpleStorage.v1_3_1.SimpleStorage",
		"Id":      "1",
		"Name":    "Simple Storage Controller",
		"Status":  okStatus(),
		"Devices": devices,
	})
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
