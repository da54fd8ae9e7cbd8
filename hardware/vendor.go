package hardware

// Vendor passthru (API 1.1): a vendor interface publishes methods that a
// client calls through /v1/nodes/{node}/vendor_passthru?method=NAME, each
// declared as Ironic's @passthru decorator declares it
// (ironic/drivers/base.py): the HTTP methods it answers, whether it runs
// asynchronously (202) or synchronously (200 with its return value),
// whether its return value is attached as a file, and whether it takes the
// node's exclusive lock. GET .../vendor_passthru/methods shows this table.

// VendorMethod is one method of a vendor interface, with the keys and the
// JSON names of Ironic's method metadata.
type VendorMethod struct {
	HTTPMethods          []string `json:"http_methods"`
	Async                bool     `json:"async"`
	Description          string   `json:"description"`
	Attach               bool     `json:"attach"`
	RequireExclusiveLock bool     `json:"require_exclusive_lock"`
}

// Vendor is what the API asks of a node's vendor interface.
type Vendor interface {
	// Methods are the node methods, by name.
	Methods() map[string]VendorMethod
	// DriverMethods are the methods of /v1/drivers/{driver}/vendor_passthru
	// (Ironic's @driver_passthru), by name.
	DriverMethods() map[string]VendorMethod
	// TouchesNoHardware reports whether the methods answer without the
	// BMC (the fake interface's), so that the API answers them itself.
	TouchesNoHardware() bool
}

type vendorBehaviour struct {
	methods, driverMethods map[string]VendorMethod
	noHardware             bool
}

func (v vendorBehaviour) TouchesNoHardware() bool { return v.noHardware }

func (v vendorBehaviour) Methods() map[string]VendorMethod       { return clone(v.methods) }
func (v vendorBehaviour) DriverMethods() map[string]VendorMethod { return clone(v.driverMethods) }

func clone(m map[string]VendorMethod) map[string]VendorMethod {
	out := make(map[string]VendorMethod, len(m))
	for k, v := range m {
		v.HTTPMethods = append([]string(nil), v.HTTPMethods...)
		out[k] = v
	}
	return out
}

// VendorOf answers for a vendor interface. An unknown name, like
// no-vendor, has no methods (Ironic's NoVendor has no routes, so a call
// is "No handler for method ...").
func VendorOf(name Interface) Vendor {
	return behaviourOf[Vendor](KindVendor, name, vendorBehaviour{})
}

// Vendor method names of the redfish vendor interface
// (ironic/drivers/modules/redfish/vendor.py, RedfishVendorPassthru).
const (
	VendorEjectVmedia         = "eject_vmedia"
	VendorCreateSubscription  = "create_subscription"
	VendorDeleteSubscription  = "delete_subscription"
	VendorGetSubscription     = "get_subscription"
	VendorGetAllSubscriptions = "get_all_subscriptions"
)

// redfishVendorMethods are RedfishVendorPassthru's: every one takes the
// exclusive lock (the decorator's default), eject_vmedia runs
// asynchronously, the subscription methods synchronously.
var redfishVendorMethods = map[string]VendorMethod{
	VendorEjectVmedia: {HTTPMethods: []string{"POST"}, Async: true, RequireExclusiveLock: true,
		Description: "Eject a virtual media device. If no device is provided then all attached devices will be ejected. Optional arguments: 'boot_device' - the boot device to eject, either 'cd', 'dvd', 'usb', or 'floppy'"},
	VendorCreateSubscription: {HTTPMethods: []string{"POST"}, RequireExclusiveLock: true,
		Description: "Creates a subscription on a node. Required argument: a dictionary of {'Destination': 'destination_url'}"},
	VendorDeleteSubscription: {HTTPMethods: []string{"DELETE"}, RequireExclusiveLock: true,
		Description: "Delete a subscription on a node. Required argument: a dictionary of {'id': 'subscription_bmc_id'}"},
	VendorGetAllSubscriptions: {HTTPMethods: []string{"GET"}, RequireExclusiveLock: true,
		Description: "Returns all subscriptions on the node."},
	VendorGetSubscription: {HTTPMethods: []string{"GET"}, RequireExclusiveLock: true,
		Description: "Get a subscription on the node. Required argument: a dictionary of {'id': 'subscription_bmc_id'}"},
}

// fakeVendorMethods are those of Ironic's fake vendor interface
// (ironic/drivers/modules/fake.py, FakeVendorB): each answers whether its
// argument bar has its word; they touch no hardware.
var fakeVendorMethods = map[string]VendorMethod{
	"second_method":             {HTTPMethods: []string{"POST"}, Async: true, RequireExclusiveLock: true, Description: "Test if the value of bar is kazoo"},
	"third_method_sync":         {HTTPMethods: []string{"POST"}, RequireExclusiveLock: true, Description: "Test if the value of bar is meow"},
	"fourth_method_shared_lock": {HTTPMethods: []string{"POST"}, Async: true, Description: "Test if the value of bar is woof"},
}

// FakeVendorWords are the words the fake vendor methods test bar against.
var FakeVendorWords = map[string]string{"second_method": "kazoo", "third_method_sync": "meow", "fourth_method_shared_lock": "woof"}
