package hardware

import (
	"fmt"
	"strings"
)

// redfish is Ironic's redfish hardware type: power, boot device, virtual
// media and out-of-band inspection through the BMC's Redfish service
// (bmc/redfish.go, bmc/redfish_inspect.go), BIOS settings as clean and
// service steps (bmc/redfish_bios.go, activities/bios.go), firmware
// updates through its UpdateService (bmc/redfish_firmware.go), RAID
// through its Storage Volumes (bmc/redfish_raid.go), event subscriptions
// as vendor passthru methods (bmc/redfish_events.go; the redfish vendor
// interface is the default, as Ironic's RedfishHardware lists it first).
func init() {
	ImplementBMC(Redfish)
	CheckInfo(KindPower, Redfish, redfishAddressProblem)
	ImplementBMCStep(KindFirmware, Redfish)
	ImplementBMCStep(KindRAID, Redfish)
	Register(Type{
		Name: "redfish",
		Keys: keys([]Key{
			{Name: "redfish_address", Description: "The URL address to the Redfish controller; https is assumed when it has no scheme. Required.", Required: true},
			{Name: "redfish_system_id", Description: "The canonical path to the ComputerSystem resource, e.g. /redfish/v1/Systems/1; default: the BMC's only system. Optional."},
			{Name: "redfish_username", Description: "User account with admin/server-profile access privilege. Optional."},
			{Name: "redfish_password", Description: "User account password. Optional.", Secret: true},
			{Name: "redfish_verify_ca", Description: "Either a Boolean value, a path to a CA_BUNDLE file or directory with certificates of trusted CAs; default True. Optional."},
			{Name: "redfish_auth_type", Description: "Redfish HTTP client authentication method: basic, session or auto (default). Optional."},
			{Name: "redfish_timeout", Description: "Seconds (or a Go duration) one HTTP request to the BMC may take; default 60. Optional."},
			{Name: "redfish_connection_attempts", Description: "Maximum number of attempts to reach the BMC; default 3. Optional."},
			{Name: "redfish_connection_retry_interval", Description: "Seconds (or a Go duration) between attempts to reach the BMC; default 2. Optional."},
		}, powerWaitKeys),
		Interfaces: map[Kind][]Interface{
			KindBIOS: {NoBIOS, Redfish}, KindBoot: {RedfishVirtualMedia, IPXE, PXE, HTTPIPXE, RedfishHTTPS}, KindConsole: {NoConsole, RedfishGraphical},
			KindDeploy: {Direct, Ramdisk, Anaconda, CustomAgent}, KindFirmware: {NoFirmware, Redfish},
			KindInspect: {Redfish, Agent, NoInspect}, KindManagement: {Redfish, Noop},
			KindNetwork: {Noop, Flat}, KindPower: {Redfish}, KindRAID: {NoRAID, Redfish, Agent},
			KindRescue: {NoRescue, Agent}, KindStorage: {Noop}, KindVendor: {Redfish, NoVendor},
		},
		BootDevices:  []string{"pxe", "disk", "cdrom", "bios"},
		Capabilities: []Capability{CapVirtualMedia, CapOutOfBandInspection, CapSecureBoot},
	})
}

// redfishAddressProblem refuses a redfish_address that names no scheme yet
// holds a space or a slash, which is no host, as Ironic's redfish power
// interface does when it validates the node.
func redfishAddressProblem(node string, info map[string]any) string {
	addr, _ := Text(info, "redfish_address")
	if strings.Contains(addr, "://") || !strings.ContainsAny(addr, " /") {
		return ""
	}
	return fmt.Sprintf("Invalid Redfish address %s set in driver_info/redfish_address on node %s", addr, node)
}
