package hardware

// Kind is a kind of hardware interface, as Ironic names them (the
// <kind>_interface fields of a node).
type Kind string

// The interface kinds, in Ironic's order.
const (
	KindBIOS       Kind = "bios"
	KindBoot       Kind = "boot"
	KindConsole    Kind = "console"
	KindDeploy     Kind = "deploy"
	KindFirmware   Kind = "firmware"
	KindInspect    Kind = "inspect"
	KindManagement Kind = "management"
	KindNetwork    Kind = "network"
	KindPower      Kind = "power"
	KindRAID       Kind = "raid"
	KindRescue     Kind = "rescue"
	KindStorage    Kind = "storage"
	KindVendor     Kind = "vendor"
)

// Kinds returns every interface kind, in Ironic's order.
func Kinds() []Kind {
	return []Kind{
		KindBIOS, KindBoot, KindConsole, KindDeploy, KindFirmware, KindInspect, KindManagement,
		KindNetwork, KindPower, KindRAID, KindRescue, KindStorage, KindVendor,
	}
}

// Interface names one implementation of an interface kind, as a node's
// <kind>_interface field holds it ("ipxe", "direct", "redfish", ...). The
// same name may serve several kinds (redfish is a power, management and
// inspect interface).
type Interface string

// The interface implementations ironflow has. Implementation (see
// implementation.go) says for each kind which of them serve it.
const (
	// Fake is fake-hardware's do-nothing implementation of every kind.
	Fake Interface = "fake"
	// Noop does nothing for its kind (management, network, storage).
	Noop Interface = "noop"

	NoBIOS     Interface = "no-bios"
	NoConsole  Interface = "no-console"
	NoFirmware Interface = "no-firmware"
	NoInspect  Interface = "no-inspect"
	NoRAID     Interface = "no-raid"
	NoRescue   Interface = "no-rescue"
	NoVendor   Interface = "no-vendor"

	// Boot interfaces: how the machine boots ironflow's images.
	IPXE Interface = "ipxe"
	PXE  Interface = "pxe"
	// HTTPIPXE: the firmware's UEFI HTTP boot loads iPXE, which loads the
	// node's script (Ironic's http-ipxe).
	HTTPIPXE            Interface = "http-ipxe"
	RedfishVirtualMedia Interface = "redfish-virtual-media"
	// RedfishHTTPS: the agent ISO of virtual media, booted by the
	// firmware's UEFI HTTP boot from the URL the BMC gives it (Redfish
	// UefiHttp with Boot.HttpBootUri; Ironic's RedfishHttpsBoot).
	RedfishHTTPS Interface = "redfish-https"

	// Deploy interfaces: how the instance gets onto the machine.
	Direct   Interface = "direct"
	Ramdisk  Interface = "ramdisk"
	Anaconda Interface = "anaconda"
	// CustomAgent boots the agent and runs the user's deploy steps on it,
	// writing no image of its own (Ironic's CustomAgentDeploy).
	CustomAgent Interface = "custom-agent"

	// Agent inspects in-band (the agent boots and reports an inventory) and
	// rescues (the agent boots and sets the rescue user's password).
	Agent Interface = "agent"

	// BMC protocols: power and management; Redfish also inspects
	// out-of-band.
	IPMITool Interface = "ipmitool"
	Redfish  Interface = "redfish"

	// Console interfaces (docs/console.md): the serial console over IPMI
	// serial-over-LAN as a TCP endpoint (Ironic's ipmitool-socat) or a web
	// terminal (ipmitool-shellinabox), and the BMC's graphical console
	// relayed to a noVNC page (redfish-graphical).
	IPMIToolSocat       Interface = "ipmitool-socat"
	IPMIToolShellinabox Interface = "ipmitool-shellinabox"
	RedfishGraphical    Interface = "redfish-graphical"

	// Flat is a network interface: the machines share one flat
	// provisioning network.
	Flat Interface = "flat"
)
