package hardware

// fake-hardware is Ironic's fake hardware type: a BMC kept in the worker's
// memory (bmc/fake.go), for tests and scale benchmarks. Its fake
// interfaces do nothing.
func init() {
	ImplementBMC(Fake)
	Register(Type{
		Name: "fake-hardware",
		Keys: keys([]Key{
			{Name: "fake_id", Description: "Name of the in-memory machine the node drives; default: the node's UUID. Optional.", DefaultsToNodeUUID: true},
			{Name: "fake_fail_rate", Description: "Fraction (0 to 1) of BMC calls that fail as a busy BMC would. Optional."},
			{Name: "fake_latency", Description: "Go duration (\"2s\") added to every BMC call. Optional."},
			{Name: "fake_health", Description: "Hardware health the machine reports to the power sync: OK, Warning, Critical, or empty for unknown; without it the machine reports none. Optional."},
			{Name: "fake_state_file", Description: "File that keeps the machine's power and boot state and a log of its power actions, so that it outlives the worker process. Optional."},
		}),
		Interfaces: map[Kind][]Interface{
			KindBIOS: {Fake, NoBIOS}, KindBoot: {Fake, IPXE, PXE, HTTPIPXE}, KindConsole: {Fake, NoConsole},
			KindDeploy: {Fake, Direct, Ramdisk, Anaconda, CustomAgent}, KindFirmware: {Fake, NoFirmware},
			KindInspect: {Fake, Agent, NoInspect}, KindManagement: {Fake, Noop},
			KindNetwork: {Noop, Flat}, KindPower: {Fake}, KindRAID: {Fake, NoRAID, Agent},
			KindRescue: {Fake, NoRescue, Agent}, KindStorage: {Noop}, KindVendor: {Fake, NoVendor},
		},
		BootDevices:  []string{"pxe", "disk"},
		Capabilities: []Capability{CapInMemoryBMC, CapSecureBoot},
	})
}
