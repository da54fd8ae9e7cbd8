package client

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Command statuses, as the Ironic Python Agent names them.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	// StatusVersionMismatch is IPA's CLEAN_VERSION_MISMATCH: the agent's
	// hardware managers changed since the steps were listed.
	StatusVersionMismatch = "CLEAN_VERSION_MISMATCH"
)

// CommandResult is one command as the agent reports it on /v1/commands.
type CommandResult struct {
	ID            string          `json:"id"`
	CommandName   string          `json:"command_name"`
	CommandParams json.RawMessage `json:"command_params,omitempty"`
	CommandStatus string          `json:"command_status"`
	CommandError  *CommandError   `json:"command_error"`
	CommandResult json.RawMessage `json:"command_result"`
}

// Done reports whether the command has stopped running.
func (r CommandResult) Done() bool { return r.CommandStatus != StatusRunning }

// Err returns nil unless the command ended in failure, in which case the
// error carries the agent's own message.
func (r CommandResult) Err() error {
	switch r.CommandStatus {
	case StatusFailed, StatusVersionMismatch:
		e := &CommandFailedError{Command: r.CommandName, ID: r.ID, Status: r.CommandStatus}
		if r.CommandError != nil {
			e.Type, e.Message, e.Details = r.CommandError.Type, r.CommandError.Message, r.CommandError.Details
		}
		return e
	}
	return nil
}

// Progress is the image write progress an agent publishes in the result of a
// running write_image step.
type Progress struct {
	// BytesWritten is what reached the disk (after decompression).
	BytesWritten int64 `json:"bytes_written"`
	// BytesDownloaded / TotalBytes count the image file as served (the
	// compressed size for gzip/zstd images); TotalBytes is 0 when unknown.
	BytesDownloaded int64 `json:"bytes_downloaded"`
	TotalBytes      int64 `json:"total_bytes"`
	// Stage names what the step is doing: "downloading", "verifying",
	// "config drive", ...
	Stage string `json:"stage,omitempty"`
	// Fraction (0..1) and ElapsedSeconds are a timed step's progress (the
	// burn-ins); Checkpoint is what it would resume from, which a re-run
	// of the step takes back as its "checkpoint" argument.
	Fraction       float64        `json:"fraction,omitempty"`
	ElapsedSeconds float64        `json:"elapsed_seconds,omitempty"`
	Checkpoint     map[string]any `json:"checkpoint,omitempty"`
}

// Progress returns the progress held in a command's result, if any.
func (r CommandResult) Progress() (Progress, bool) {
	type withProgress struct {
		Progress *Progress `json:"progress"`
	}
	// While running the agent publishes {"progress": ...}; a finished step
	// keeps it inside deploy_result / clean_result.
	var body struct {
		withProgress
		DeployResult *withProgress `json:"deploy_result"`
		CleanResult  *withProgress `json:"clean_result"`
	}
	if len(r.CommandResult) == 0 || json.Unmarshal(r.CommandResult, &body) != nil {
		return Progress{}, false
	}
	for _, p := range []*withProgress{&body.withProgress, body.DeployResult, body.CleanResult} {
		if p != nil && p.Progress != nil {
			return *p.Progress, true
		}
	}
	return Progress{}, false
}

// CommandError is IPA's serialized error: {type, code, message, details}.
// Older agents and custom ones send a bare string; it lands in Details.
type CommandError struct {
	Type    string `json:"type,omitempty"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Details string `json:"details,omitempty"`
}

// UnmarshalJSON accepts both the object form and a bare string.
func (e *CommandError) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = CommandError{Details: s}
		return nil
	}
	type plain CommandError
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		// An unexpected shape still carries the agent's words: keep them.
		*e = CommandError{Details: string(b)}
		return nil
	}
	*e = CommandError(p)
	return nil
}

// Error formats the error the way IPA's RESTError prints: "message: details".
func (e *CommandError) Error() string {
	switch {
	case e.Message != "" && e.Details != "":
		return e.Message + ": " + e.Details
	case e.Message != "":
		return e.Message
	}
	return e.Details
}

// Step is a deploy or clean step as the agent lists it and as it is sent
// back to be executed (with Args).
type Step struct {
	Step            string         `json:"step"`
	Priority        int            `json:"priority"`
	Interface       string         `json:"interface"`
	RebootRequested bool           `json:"reboot_requested"`
	Abortable       bool           `json:"abortable,omitempty"`
	ArgsInfo        map[string]any `json:"argsinfo,omitempty"`
	Args            map[string]any `json:"args,omitempty"`
}

// StepList is the answer to get_deploy_steps / get_clean_steps, flattened
// over the agent's hardware managers.
type StepList struct {
	Steps []Step
	// HardwareManagerVersion is passed back as deploy_version/clean_version
	// so the agent can refuse steps listed by a different agent build.
	HardwareManagerVersion map[string]any
}

// Status is the answer to GET /v1/status.
type Status struct {
	StartedAt float64 `json:"started_at"`
	Version   string  `json:"version"`
}

// Inventory is IPA's hardware inventory (poll.get_hardware_info and the
// inspection payload), restricted to the fields ironflow fills. It is the
// one inventory schema: the agent reports it in band, and a BMC's
// out-of-band inspection (bmc.Inspector) fills what a BMC knows of it.
type Inventory struct {
	CPU          CPU          `json:"cpu"`
	Memory       Memory       `json:"memory"`
	Disks        []Disk       `json:"disks"`
	Interfaces   []Interface  `json:"interfaces"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
	Hostname     string       `json:"hostname,omitempty"`
}

// CPU is the processor part of the inventory. Count is hardware threads,
// as IPA counts the kernel's CPUs.
type CPU struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency,omitempty"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags,omitempty"`
}

// Memory sizes are in bytes (total) and MiB (physical_mb), as in IPA. A BMC
// reports what is installed for both: it cannot know what the kernel
// reserves, which IPA's total excludes.
type Memory struct {
	Total      int64 `json:"total"`
	PhysicalMB int64 `json:"physical_mb"`
}

// Disk is one block device; size in bytes. Name is the kernel's (/dev/sda)
// from the agent, the BMC's name for the drive (a bay or drive Id) from
// out-of-band inspection.
type Disk struct {
	Name       string `json:"name"`
	Model      string `json:"model,omitempty"`
	Size       int64  `json:"size"`
	Rotational bool   `json:"rotational"`
	WWN        string `json:"wwn,omitempty"`
	Serial     string `json:"serial,omitempty"`
	Vendor     string `json:"vendor,omitempty"`
	ByPath     string `json:"by_path,omitempty"`
	HCTL       string `json:"hctl,omitempty"`
}

// Interface is one network interface. Name is the kernel's from the agent,
// the BMC's Id for the port from out-of-band inspection. HasCarrier is nil
// where the link state is unknown (a BMC's view) and then left out.
type Interface struct {
	Name        string `json:"name"`
	MACAddress  string `json:"mac_address"`
	IPV4Address string `json:"ipv4_address,omitempty"`
	IPV6Address string `json:"ipv6_address,omitempty"`
	HasCarrier  *bool  `json:"has_carrier,omitempty"`
	// Vendor and Product are the PCI IDs ("0x1af4"), PCIAddress the
	// device's PCI address, Driver its kernel driver, SpeedMbps the link
	// speed (left out where the kernel does not know it): IPA's fields,
	// which Metal3 shows as the NIC's model, PCI address and speed.
	Vendor     string `json:"vendor,omitempty"`
	Product    string `json:"product,omitempty"`
	PCIAddress string `json:"pci_address,omitempty"`
	Driver     string `json:"driver,omitempty"`
	SpeedMbps  int    `json:"speed_mbps,omitempty"`
	// LLDP is the first LLDP frame the interface received, as [type, "hex
	// value"] pairs (IPA's collect_lldp); nil when not collected.
	LLDP [][2]any `json:"lldp,omitempty"`
}

// SystemVendor comes from DMI.
type SystemVendor struct {
	Manufacturer string `json:"manufacturer"`
	ProductName  string `json:"product_name"`
	SerialNumber string `json:"serial_number"`
}

// Boot says how the machine booted: current_boot_mode "uefi" or "bios".
type Boot struct {
	CurrentBootMode string `json:"current_boot_mode"`
	// PXEInterface is the BOOTIF the machine booted with
	// ("01-52-54-00-12-34-56"), as IPA reports it.
	PXEInterface string `json:"pxe_interface,omitempty"`
}

// CommandFailedError is a command that ran and ended FAILED; the text is the
// agent's command_error.
type CommandFailedError struct {
	Command string
	ID      string
	Status  string
	Type    string
	Message string
	Details string
}

func (e *CommandFailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent command %s failed", e.Command)
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	ce := CommandError{Message: e.Message, Details: e.Details}
	if s := ce.Error(); s != "" {
		b.WriteString(": " + s)
	}
	return b.String()
}

// Unwrap lets errors.Is(err, ErrCommandFailed) match.
func (e *CommandFailedError) Unwrap() error { return ErrCommandFailed }
