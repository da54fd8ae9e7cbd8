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
	// behaviour answers the kind's questions: a Boot, Deploy or Inspect
	// for those kinds, nil for the others.
	behaviour any
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
)

// Boot is what the workflows and activities ask of a node's boot interface.
type Boot interface {
	// VirtualMedia reports whether the machine boots ironflow's images
	// from a virtual CD the BMC inserts, rather than from the network.
	VirtualMedia() bool
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

type bootBehaviour struct{ virtualMedia bool }

func (b bootBehaviour) VirtualMedia() bool { return b.virtualMedia }

type deployBehaviour struct {
	flow                     DeployFlow
	writesDisk, preparesBoot bool
}

func (d deployBehaviour) Flow() DeployFlow   { return d.flow }
func (d deployBehaviour) WritesDisk() bool   { return d.writesDisk }
func (d deployBehaviour) PreparesBoot() bool { return d.preparesBoot }

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

// implementations are every interface ironflow implements, per kind.
// Interfaces Ironic has and ironflow does not run (vendor passthru,
// consoles) are
// absent on purpose: add one here with the code that serves
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
	for kind, names := range map[Kind][]Interface{
		KindBIOS: {NoBIOS, Fake}, KindConsole: {NoConsole, Fake}, KindFirmware: {NoFirmware, Fake},
		KindRAID: {NoRAID, Fake}, KindVendor: {NoVendor, Fake},
		KindStorage: {Noop},
		// ironflow's DHCP and boot services serve one flat provisioning
		// network: no port binding to do, which is what noop and flat mean.
		KindNetwork: {Noop, Flat},
		// noop management: boot devices are still set through the BMC
		// driver when a workflow needs them.
		KindManagement: {Noop},
	} {
		for _, name := range names {
			implement(kind, name, servedByNothing, "", nil)
		}
	}
	// The fake boot interface is served as network boot too; it declares no
	// agent-image keys, so that validation checks none, as Ironic's fake
	// boot interface does.
	implement(KindBoot, Fake, servedByPXE, "", bootBehaviour{})
	for _, name := range []Interface{IPXE, PXE} {
		implement(KindBoot, name, servedByPXE, "", bootBehaviour{}, agentImageKeys...)
	}
	implement(KindBoot, RedfishVirtualMedia, servedByVirtualCD, CapVirtualMedia, bootBehaviour{virtualMedia: true}, agentImageKeys...)

	implement(KindDeploy, Direct, "workflows DeployNode: the agent's deploy steps", "", deployBehaviour{FlowAgent, true, true}, imageTrustKeys...)
	implement(KindDeploy, Ramdisk, "workflows DeployNode: the instance's ramdisk booted from the network", "", deployBehaviour{FlowRamdisk, true, true})
	implement(KindDeploy, Anaconda, "workflows DeployNode: the installer and its kickstart", "", deployBehaviour{FlowInstaller, true, true})
	implement(KindDeploy, Fake, "workflows DeployNode: power on, nothing written", "", deployBehaviour{FlowNone, false, false})

	implement(KindRescue, NoRescue, servedByNothing, "", rescueBehaviour{RescueNothing, false})
	implement(KindRescue, Fake, servedByNothing, "", rescueBehaviour{RescueNothing, true})
	implement(KindRescue, Agent, "workflows RescueNode and UnrescueNode: the agent's rescue.finalize_rescue", "", rescueBehaviour{RescueAgent, true}, rescueImageKeys...)

	implement(KindInspect, NoInspect, servedByNothing, "", inspectBehaviour{InspectNothing})
	implement(KindInspect, Fake, servedByNothing, "", inspectBehaviour{InspectNothing})
	implement(KindInspect, Agent, "workflows InspectNode: the agent's inventory", "", inspectBehaviour{InspectInBand})
	implement(KindBIOS, Redfish, "activities RunInterfaceStep: the BMC driver's BIOS settings (bmc.BIOSConfigurer)", "", nil)
	// Software RAID built in-band by the agent's raid.create_configuration
	// and delete_configuration clean steps (agent/raid.go), as Ironic's
	// AgentRAID; the conductor records the agent's result in raid_config
	// (activities/raid_agent.go).
	implement(KindRAID, Agent, "activities RunAgentStep: the agent's software RAID steps (agent/raid.go)", "", nil)
	implement(KindInspect, Redfish, "workflows InspectNode: the BMC driver's inventory (bmc.Inspector)", CapOutOfBandInspection, inspectBehaviour{InspectOutOfBand})
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
	implementations[kind][name] = Implementation{Kind: kind, Name: name, Served: servedByBMC}
}

// Implemented returns the implementation of interface name for kind, if
// ironflow has one.
func Implemented(kind Kind, name Interface) (Implementation, bool) {
	impl, ok := implementations[kind][name]
	return impl, ok
}

// BootOf answers for a boot interface. An unknown name boots from the
// network.
func BootOf(name Interface) Boot {
	if b, ok := implementations[KindBoot][name].behaviour.(Boot); ok {
		return b
	}
	return bootBehaviour{}
}

// DeployOf answers for a deploy interface. An unknown name writes nothing,
// as fake does, but its boot is removed after a failure all the same.
func DeployOf(name Interface) Deploy {
	if d, ok := implementations[KindDeploy][name].behaviour.(Deploy); ok {
		return d
	}
	return deployBehaviour{flow: FlowNone, preparesBoot: true}
}

// RescueOf answers for a rescue interface. An unknown name refuses
// rescue.
func RescueOf(name Interface) Rescue {
	if r, ok := implementations[KindRescue][name].behaviour.(Rescue); ok {
		return r
	}
	return rescueBehaviour{RescueNothing, false}
}

// InspectOf answers for an inspect interface. An unknown name inspects
// in-band.
func InspectOf(name Interface) Inspect {
	if i, ok := implementations[KindInspect][name].behaviour.(Inspect); ok {
		return i
	}
	return inspectBehaviour{InspectInBand}
}
