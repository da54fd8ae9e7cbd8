package hardware

// ipmi is Ironic's ipmi hardware type: power and boot device through IPMI
// over LAN (bmc/ipmi.go), network boot only.
func init() {
	ImplementBMC(IPMITool)
	Register(Type{
		Name: "ipmi",
		Keys: keys([]Key{
			{Name: "ipmi_address", Description: "IP address or hostname of the node. Required.", Required: true},
			{Name: "ipmi_port", Description: "remote IPMI RMCP port; default 623. Optional."},
			{Name: "ipmi_username", Description: "username; default is NULL user. Optional."},
			{Name: "ipmi_password", Description: "password. Optional.", Secret: true},
			{Name: "ipmi_cipher_suite", Description: "IPMI cipher suite to use; default 3. Optional."},
			{Name: "ipmi_priv_level", Description: "privilege level: ADMINISTRATOR (default), OPERATOR, USER or CALLBACK. Optional."},
			{Name: "ipmi_timeout", Description: "Seconds (or a Go duration) one IPMI exchange may take; default 2. Optional."},
			{Name: "ipmi_retries", Description: "Further tries of an exchange whose answer was lost; default 3. Optional."},
		}, powerWaitKeys),
		Interfaces: map[Kind][]Interface{
			KindBIOS: {NoBIOS}, KindBoot: {IPXE, PXE, HTTPIPXE}, KindConsole: {NoConsole, IPMIToolSocat, IPMIToolShellinabox},
			KindDeploy: {Direct, Ramdisk, Anaconda, CustomAgent}, KindFirmware: {NoFirmware},
			KindInspect: {NoInspect, Agent}, KindManagement: {IPMITool, Noop},
			KindNetwork: {Noop, Flat}, KindPower: {IPMITool}, KindRAID: {NoRAID, Agent},
			KindRescue: {NoRescue, Agent}, KindStorage: {Noop}, KindVendor: {NoVendor},
		},
		BootDevices: []string{"pxe", "disk", "cdrom", "bios", "safe"},
	})
}
