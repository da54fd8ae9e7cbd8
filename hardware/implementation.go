package hardware

// An Implementation is one interface ironflow implements for one kind:
// the code that serves it and what the workflows may ask of it. Only an
// interface with an Implementation may be advertised by a hardware type
// (Register refuses others), so that GET /v1/drivers never lists an
// interface nothing runs.
type Implementation struct {
	Kind Kind
	Name Interface
	// Served names the code that serves it, for whoever reads a listing
	// or a test failure.
	Served string
	// Needs is the capability a hardware type must have to advertise it
	// ("" for none).
	Needs Capability
	// Keys are the driver_info keys it reads; a hardware type that
	// supports it shows them among its properties.
	Keys []Key
	// behaviour answers the kind's questions: a Boot, Deploy, Rescue,
	// Inspect, BIOS or Network for those kinds, nil for the others.
	behaviour any
	// steps is how the interface's out-of-band steps run (StepsOf).
	steps StepMethod
	// refuses: Ironic's no-<kind> interface, which refuses its kind's
	// operations (Refuses).
	refuses bool
	// checkInfo words what is wrong with a node's driver_info for this
	// interface, "" when nothing is (InfoProblem).
	checkInfo func(node string, info map[string]any) string
}

// Refuses reports whether the implementation is Ironic's no-<kind>
// interface (no-raid, no-bios, ...), which refuses the kind's operations
// with UnsupportedDriverExtension. An unknown interface (the zero
// Implementation) does not refuse.
func (impl Implementation) Refuses() bool { return impl.refuses }

// InfoProblem is what the implementation finds wrong with a node's
// driver_info beyond missing keys, worded as Ironic's interface of that
// name words it; "" when nothing is.
func (impl Implementation) InfoProblem(node string, info map[string]any) string {
	if impl.checkInfo == nil {
		return ""
	}
	return impl.checkInfo(node, info)
}

// UsesBMC reports whether the implementation drives the hardware type's
// BMC, so that it needs the BMC's driver_info keys.
func (impl Implementation) UsesBMC() bool { return impl.Served == servedByBMC }

// Reads reports whether the implementation reads driver_info key.
func (impl Implementation) Reads(key string) bool {
	for _, k := range impl.Keys {
		if k.Name == key {
			return true
		}
	}
	return false
}

// What serves an implementation.
const (
	servedByNothing   = "nothing: ironflow does no work for this interface"
	servedByBMC       = "the hardware type's BMC driver (package bmc)"
	servedByPXE       = "activities PrepareBoot/CleanBoot: a boot configuration the pxe services serve"
	servedByVirtualCD = "activities PrepareBoot/CleanBoot: an ISO inserted through the BMC driver"
	servedByHTTPURI   = "activities PrepareBoot/CleanBoot and SetBootDevice: an ISO whose URL the BMC driver gives the firmware to HTTP-boot"
)

// Boot is what the workflows and activities ask of a node's boot interface.
type Boot interface {
	// VirtualMedia reports whether the machine boots ironflow's images
	// from a virtual CD the BMC inserts, rather than from the network.
	VirtualMedia() bool
	// HTTPBoot reports whether the firmware fetches its loader over UEFI
	// HTTP boot rather than PXE and TFTP (docs/bmcs-and-boot.md).
	HTTPBoot() bool
	// BootsURL reports whether the BMC points the firmware's UEFI HTTP
	// boot at the agent ISO's URL (boot device uefihttp) instead of
	// inserting the ISO (VirtualMedia is true too: the same ISO).
	BootsURL() bool
}

// DeployFlow is how a deploy interface gets the instance onto the machine;
// the deploy workflow runs one flow per value.
type DeployFlow int

const (
	// FlowNone writes nothing: the instance is powered on (fake).
	FlowNone DeployFlow = iota
	// FlowAgent boots the agent and runs the deploy steps in-band (direct).
	FlowAgent
	// FlowRamdisk network-boots the instance's own kernel and ramdisk on
	// every boot (ramdisk).
	FlowRamdisk
	// FlowInstaller boots an installer with a kickstart (anaconda).
	FlowInstaller
)

// Deploy is what the workflows ask of a node's deploy interface.
type Deploy interface {
	Flow() DeployFlow
	// WritesDisk reports whether the deployed machine has something on its
	// disks that automated cleaning erases (Ironic cleans ramdisk nodes
	// too).
	WritesDisk() bool
	// PreparesBoot reports whether the deploy prepares a boot that must be
	// removed when it fails.
	PreparesBoot() bool
	// WritesImage reports whether an agent deploy writes the instance
	// image itself (direct: deploy.write_image and the bootloader, with
	// instance_info image_source required); custom-agent leaves the disk to
	// the user's deploy steps, as Ironic's CustomAgentDeploy does.
	WritesImage() bool
}

// InspectMethod is how an inspect interface learns the hardware.
type InspectMethod int

const (
	// InspectNothing learns nothing (fake, no-inspect).
	InspectNothing InspectMethod = iota
	// InspectInBand boots the agent, which reports its inventory.
	InspectInBand
	// InspectOutOfBand asks the BMC; nothing boots.
	InspectOutOfBand
)

// Inspect is what the inspect workflow asks of a node's inspect interface.
type Inspect interface {
	Method() InspectMethod
}

// StepMethod is how an interface's out-of-band steps (the bios, raid and
// firmware interfaces' clean, service and deploy steps) run.
type StepMethod int

const (
	// StepsNone: the interface has no steps of its own (no-bios, no-raid,
	// no-firmware, and an unknown interface).
	StepsNone StepMethod = iota
	// StepsRecorded: its steps do nothing and say so in the node's
	// history, as Ironic's fake interfaces' do (fake).
	StepsRecorded
	// StepsOutOfBand: the hardware type's BMC driver runs them (redfish).
	StepsOutOfBand
	// StepsInBand: the agent runs them on the machine (raid agent: the
	// agent's software RAID steps).
	StepsInBand
)

// BIOS is what the workflows ask of a node's bios interface.
type BIOS interface {
	// CachesSettings reports whether the interface reads the machine's
	// BIOS settings, which the workflows cache when a node is verified,
	// cleaned or serviced (Ironic's cache_bios_settings).
	CachesSettings() bool
	// AppliesAtReboot reports whether its steps (apply_configuration,
	// factory_reset) reboot the machine for the firmware to apply them.
	AppliesAtReboot() bool
}

// Network is what the API asks of a node's network interface.
type Network interface {
	// RecordsVIFs reports whether attaching a VIF records it on a port or
	// port group (flat: internal_info.tenant_vif_port_id); otherwise
	// attach and detach are accepted and do nothing (noop).
	RecordsVIFs() bool
}

type bootBehaviour struct{ virtualMedia, httpBoot, bootsURL bool }

func (b bootBehaviour) VirtualMedia() bool { return b.virtualMedia }
func (b bootBehaviour) HTTPBoot() bool     { return b.httpBoot }
func (b bootBehaviour) BootsURL() bool     { return b.bootsURL }

type deployBehaviour struct {
	flow                     DeployFlow
	writesDisk, preparesBoot bool
	writesImage              bool
}

func (d deployBehaviour) Flow() DeployFlow   { return d.flow }
func (d deployBehaviour) WritesDisk() bool   { return d.writesDisk }
func (d deployBehaviour) PreparesBoot() bool { return d.preparesBoot }
func (d deployBehaviour) WritesImage() bool  { return d.writesImage }

// RescueMethod is how a rescue interface rescues an instance.
type RescueMethod int

const (
	// RescueNothing boots nothing: the node is recorded rescued (fake,
	// and what no-rescue would do, were it not refused).
	RescueNothing RescueMethod = iota
	// RescueAgent boots the agent, which sets the rescue user's password
	// (rescue.finalize_rescue); unrescue boots the instance again.
	RescueAgent
)

// Rescue is what the rescue workflows ask of a node's rescue interface.
type Rescue interface {
	Method() RescueMethod
	// Supported is false for no-rescue, which refuses rescue.
	Supported() bool
}

type rescueBehaviour struct {
	method    RescueMethod
	supported bool
}

func (r rescueBehaviour) Method() RescueMethod { return r.method }
func (r rescueBehaviour) Supported() bool      { return r.supported }

type inspectBehaviour struct{ method InspectMethod }

func (i inspectBehaviour) Method() InspectMethod { return i.method }

type biosBehaviour struct{ cachesSettings, appliesAtReboot bool }

func (b biosBehaviour) CachesSettings() bool  { return b.cachesSettings }
func (b biosBehaviour) AppliesAtReboot() bool { return b.appliesAtReboot }

type networkBehaviour struct{ recordsVIFs bool }

func (n networkBehaviour) RecordsVIFs() bool { return n.recordsVIFs }

// implementations are every interface ironflow implements, per kind.
// Interfaces Ironic has and ironflow does not run (the ipmitool vendor
// interface) are absent on purpose: add one here with the code that serves
// it before a hardware type advertises it.
//
// It is a variable initialised before any init function runs, so that the
// hardware types' init functions can check their interfaces against it.
var implementations = declareImplementations()

func declareImplementations() map[Kind]map[Interface]Implementation {
	impls := map[Kind]map[Interface]Implementation{}
	implement := func(kind Kind, name Interface, served string, needs Capability, behaviour any, keys ...Key) {
		if impls[kind] == nil {
			impls[kind] = map[Interface]Implementation{}
		}
		impls[kind][name] = Implementation{Kind: kind, Name: name, Served: served, Needs: needs, Keys: keys, behaviour: behaviour}
	}
	// set changes what implement declared.
	set := func(kind Kind, name Interface, change func(*Implementation)) {
		impl := impls[kind][name]
		change(&impl)
		impls[kind][name] = impl
	}
	for kind, names := range map[Kind][]Interface{
		KindBIOS: {NoBIOS, Fake}, KindFirmware: {NoFirmware, Fake},
		KindRAID: {NoRAID, Fake}, KindVendor: {NoVendor, Fake},
		KindStorage: {Noop},
		// noop management: boot devices are still set through the BMC
		// driver when a workflow needs them.
		KindManagement: {Noop},
	} {
		for _, name := range names {
			implement(kind, name, servedByNothing, "", nil)
		}
	}
	// The fake bios, raid and firmware interfaces' steps do nothing and
	// say so (activities RunInterfaceStep), as Ironic's fake interfaces'.
	for _, kind := range []Kind{KindBIOS, KindRAID, KindFirmware} {
		set(kind, Fake, func(impl *Implementation) { impl.steps = StepsRecorded })
	}
	// ironflow's DHCP and boot services serve one flat provisioning
	// network: no port binding to do, which is what noop and flat mean;
	// flat records the VIFs attached to the node's ports.
	implement(KindNetwork, Noop, servedByNothing, "", networkBehaviour{})
	implement(KindNetwork, Flat, servedByNothing, "", networkBehaviour{recordsVIFs: true})
	// The fake boot interface is served as network boot too; it declares no
	// agent-image keys, so that validation checks none, as Ironic's fake
	// boot interface does.
	implement(KindBoot, Fake, servedByPXE, "", bootBehaviour{})
	for _, name := range []Interface{IPXE, PXE} {
		implement(KindBoot, name, servedByPXE, "", bootBehaviour{}, agentImageKeys...)
	}
	// http-ipxe (Ironic's HttpIPXEBoot): UEFI HTTP boot of iPXE, then as
	// ipxe; no TFTP (pxe/httpboot.go).
	implement(KindBoot, HTTPIPXE, servedByPXE, "", bootBehaviour{httpBoot: true}, agentImageKeys...)
	implement(KindBoot, RedfishVirtualMedia, servedByVirtualCD, CapVirtualMedia, bootBehaviour{virtualMedia: true}, agentImageKeys...)
	// redfish-https (Ironic's RedfishHttpsBoot): the virtual-media ISO,
	// its URL handed to the firmware's UEFI HTTP boot by the BMC.
	implement(KindBoot, RedfishHTTPS, servedByHTTPURI, "", bootBehaviour{virtualMedia: true, bootsURL: true}, agentImageKeys...)

	implement(KindDeploy, Direct, "workflows DeployNode: the agent's deploy steps", "", deployBehaviour{FlowAgent, true, true, true}, imageTrustKeys...)
	// custom-agent (docs/bmcs-and-boot.md): the agent boots, the user's
	// deploy steps run on it by name, then the instance boots from disk;
	// no image is downloaded or written (Ironic's CustomAgentDeploy).
	implement(KindDeploy, CustomAgent, "workflows DeployNode: the agent runs the user's deploy steps", "", deployBehaviour{flow: FlowAgent, writesDisk: true, preparesBoot: true})
	implement(KindDeploy, Ramdisk, "workflows DeployNode: the instance's ramdisk booted from the network", "", deployBehaviour{FlowRamdisk, true, true, false})
	implement(KindDeploy, Anaconda, "workflows DeployNode: the installer and its kickstart", "", deployBehaviour{FlowInstaller, true, true, false})
	implement(KindDeploy, Fake, "workflows DeployNode: power on, nothing written", "", deployBehaviour{FlowNone, false, false, false})

	implement(KindRescue, NoRescue, servedByNothing, "", rescueBehaviour{RescueNothing, false})
	implement(KindRescue, Fake, servedByNothing, "", rescueBehaviour{RescueNothing, true})
	implement(KindRescue, Agent, "workflows RescueNode and UnrescueNode: the agent's rescue.finalize_rescue", "", rescueBehaviour{RescueAgent, true}, rescueImageKeys...)

	implement(KindInspect, NoInspect, servedByNothing, "", inspectBehaviour{InspectNothing})
	implement(KindInspect, Fake, servedByNothing, "", inspectBehaviour{InspectNothing})
	implement(KindInspect, Agent, "workflows InspectNode: the agent's inventory", "", inspectBehaviour{InspectInBand})
	// The BMC reads the BIOS settings and applies new ones when the
	// machine reboots (activities/bios.go).
	implement(KindBIOS, Redfish, "activities RunInterfaceStep: the BMC driver's BIOS settings (bmc.BIOSConfigurer)", "", biosBehaviour{cachesSettings: true, appliesAtReboot: true})
	set(KindBIOS, Redfish, func(impl *Implementation) { impl.steps = StepsOutOfBand })
	// Software RAID built in-band by the agent's raid.create_configuration
	// and delete_configuration clean steps (agent/raid.go), as Ironic's
	// AgentRAID; the conductor records the agent's result in raid_config
	// (activities/raid_agent.go).
	implement(KindRAID, Agent, "activities RunAgentStep: the agent's software RAID steps (agent/raid.go)", "", nil)
	set(KindRAID, Agent, func(impl *Implementation) { impl.steps = StepsInBand })
	implement(KindInspect, Redfish, "workflows InspectNode: the BMC driver's inventory (bmc.Inspector)", CapOutOfBandInspection, inspectBehaviour{InspectOutOfBand})
	// Vendor passthru (hardware/vendor.go): the fake methods answer in the
	// API; the redfish methods run on the BMC (workflows VendorPassthru).
	set(KindVendor, Fake, func(impl *Implementation) {
		impl.behaviour = vendorBehaviour{methods: fakeVendorMethods, noHardware: true}
	})
	implement(KindVendor, Redfish, "workflows VendorPassthru: the BMC driver's event subscriptions and virtual media (bmc.EventSubscriber)", "", vendorBehaviour{methods: redfishVendorMethods})

	declareConsoles(implement)

	// Ironic's no-<kind> interfaces refuse their kind's operations.
	for kind, name := range map[Kind]Interface{
		KindBIOS: NoBIOS, KindConsole: NoConsole, KindFirmware: NoFirmware, KindInspect: NoInspect,
		KindRAID: NoRAID, KindRescue: NoRescue, KindVendor: NoVendor,
	} {
		set(kind, name, func(impl *Implementation) { impl.refuses = true })
	}
	return impls
}

// ImplementBMC declares name as a power and management interface served by
// the hardware type's BMC driver (package bmc). Each hardware type's file
// declares its BMC protocol so from init, before Register; the registry is
// not changed after init.
func ImplementBMC(name Interface) {
	for _, kind := range []Kind{KindPower, KindManagement} {
		if implementations[kind] == nil {
			implementations[kind] = map[Interface]Implementation{}
		}
		implementations[kind][name] = Implementation{Kind: kind, Name: name, Served: servedByBMC}
	}
}

// ImplementBMCStep declares name as an interface of kind whose steps the
// hardware type's BMC driver serves (the firmware interface's update:
// workflows/firmware.go, bmc.Firmware; the raid interface's steps:
// activities/raid.go, bmc.RAID).
func ImplementBMCStep(kind Kind, name Interface) {
	if implementations[kind] == nil {
		implementations[kind] = map[Interface]Implementation{}
	}
	implementations[kind][name] = Implementation{Kind: kind, Name: name, Served: servedByBMC, steps: StepsOutOfBand}
}

// CheckInfo declares how the BMC interface name of kind words a problem
// with a node's driver_info beyond missing keys (InfoProblem). Like
// ImplementBMC it is called from the hardware type's init, after
// ImplementBMC.
func CheckInfo(kind Kind, name Interface, check func(node string, info map[string]any) string) {
	impl, ok := implementations[kind][name]
	if !ok {
		panic("hardware: CheckInfo of " + string(kind) + " interface " + string(name) + ", which is not implemented")
	}
	impl.checkInfo = check
	implementations[kind][name] = impl
}

// Implemented returns the implementation of interface name for kind, if
// ironflow has one.
func Implemented(kind Kind, name Interface) (Implementation, bool) {
	impl, ok := implementations[kind][name]
	return impl, ok
}

// behaviourOf is what interface name of kind answers, or unknown when
// ironflow does not implement it.
func behaviourOf[B any](kind Kind, name Interface, unknown B) B {
	if b, ok := implementations[kind][name].behaviour.(B); ok {
		return b
	}
	return unknown
}

// BootOf answers for a boot interface. An unknown name boots from the
// network.
func BootOf(name Interface) Boot {
	return behaviourOf[Boot](KindBoot, name, bootBehaviour{})
}

// DeployOf answers for a deploy interface. An unknown name writes nothing,
// as fake does, but its boot is removed after a failure all the same.
func DeployOf(name Interface) Deploy {
	return behaviourOf[Deploy](KindDeploy, name, deployBehaviour{flow: FlowNone, preparesBoot: true})
}

// RescueOf answers for a rescue interface. An unknown name refuses
// rescue.
func RescueOf(name Interface) Rescue {
	return behaviourOf[Rescue](KindRescue, name, rescueBehaviour{RescueNothing, false})
}

// StepsOf says how the out-of-band steps of interface name of kind run.
// An unknown name has none.
func StepsOf(kind Kind, name Interface) StepMethod {
	return implementations[kind][name].steps
}

// BIOSOf answers for a bios interface. An unknown name neither reads nor
// applies settings.
func BIOSOf(name Interface) BIOS {
	return behaviourOf[BIOS](KindBIOS, name, biosBehaviour{})
}

// NetworkOf answers for a network interface. An unknown name records no
// VIFs, as noop.
func NetworkOf(name Interface) Network {
	return behaviourOf[Network](KindNetwork, name, networkBehaviour{})
}

// InspectOf answers for an inspect interface. An unknown name inspects
// in-band.
func InspectOf(name Interface) Inspect {
	return behaviourOf[Inspect](KindInspect, name, inspectBehaviour{InspectInBand})
}
