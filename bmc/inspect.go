package bmc

import "context"

// Inspector is implemented by drivers that can read a machine's hardware
// out of band (Ironic's inspect_interface=redfish). Callers type-assert a
// Driver to it; drivers that cannot inspect (ipmi) simply do not implement it.
type Inspector interface {
	Inspect(ctx context.Context) (Inventory, error)
}

// Inventory is a machine's hardware in the shape of Ironic Python Agent's
// inventory, as far as a BMC can fill it: a BMC knows no kernel device names
// or IP addresses, so those fields are left out rather than guessed.
type Inventory struct {
	CPU          CPU          `json:"cpu"`
	Memory       Memory       `json:"memory"`
	Disks        []Disk       `json:"disks"`
	Interfaces   []Interface  `json:"interfaces"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
}

// CPU counts hardware threads, as IPA does (it reads the kernel's CPUs).
type CPU struct {
	Count        int    `json:"count"`
	Architecture string `json:"architecture"`
	ModelName    string `json:"model_name"`
}

// Memory: PhysicalMB is what is installed, Total the same in bytes (a BMC
// cannot know what the kernel reserves, which IPA's total excludes).
type Memory struct {
	PhysicalMB int64 `json:"physical_mb"`
	Total      int64 `json:"total"`
}

// Disk is one present drive. Name is the BMC's name for it (a bay or drive
// Id), not a /dev path.
type Disk struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Model      string `json:"model"`
	Serial     string `json:"serial"`
	Rotational bool   `json:"rotational"`
}

// Interface is one physical network port. Name is the BMC's Id for it.
type Interface struct {
	Name       string `json:"name"`
	MACAddress string `json:"mac_address"`
}

// SystemVendor names the machine.
type SystemVendor struct {
	Manufacturer string `json:"manufacturer"`
	ProductName  string `json:"product_name"`
	SerialNumber string `json:"serial_number"`
}

// Boot says how the machine boots: "uefi" or "bios", as IPA reports it.
type Boot struct {
	CurrentBootMode string `json:"current_boot_mode"`
}
