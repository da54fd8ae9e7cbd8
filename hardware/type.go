package hardware

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Capability is something a hardware type's BMC can do that an interface
// implementation relies on.
type Capability string

const (
	// CapVirtualMedia: the BMC inserts an ISO as a virtual CD
	// (bmc.Driver InsertMedia works).
	CapVirtualMedia Capability = "virtual_media"
	// CapOutOfBandInspection: the BMC reports the machine's inventory
	// (its bmc driver implements bmc.Inspector).
	CapOutOfBandInspection Capability = "out_of_band_inspection"
	// CapInMemoryBMC: there is no BMC to reach; the driver keeps each
	// machine in the worker's memory, so its calls run as local activities
	// and a key marked DefaultsToNodeUUID tells the machines apart.
	CapInMemoryBMC Capability = "in_memory_bmc"
	// CapSecureBoot: the type's management sets the machine's UEFI secure
	// boot state (Ironic's set_secure_boot_state; bmc.SecureBooter).
	CapSecureBoot Capability = "secure_boot"
)

// Key is one driver_info key a hardware type reads.
type Key struct {
	Name string
	// Description is what GET /v1/drivers/{name}/properties shows; it ends
	// in "Required." or "Optional." as Ironic's do.
	Description string
	// Required keys must be set (non-empty) for the BMC to be reached;
	// validation names the missing ones.
	Required bool
	// Secret keys are credentials.
	Secret bool
	// DefaultsToNodeUUID: the worker fills the key with the node's UUID
	// when driver_info does not set it.
	DefaultsToNodeUUID bool
}

// Type is one hardware type (an Ironic driver).
type Type struct {
	Name string
	// Keys are the driver_info keys its BMC driver reads, required ones
	// first. The keys of its interfaces' implementations come on top (see
	// AllKeys).
	Keys []Key
	// Interfaces lists, per kind, the interfaces it supports; the first is
	// the default, as Ironic picks the first supported one. Every kind has
	// at least one.
	Interfaces map[Kind][]Interface
	// BootDevices are the devices /management/boot_device accepts.
	BootDevices  []string
	Capabilities []Capability
}

// Default is the interface a node of this type gets for kind when it
// names none.
func (t *Type) Default(kind Kind) Interface { return t.Interfaces[kind][0] }

// Supported returns the interfaces of kind the type supports, default first.
func (t *Type) Supported(kind Kind) []Interface { return slices.Clone(t.Interfaces[kind]) }

// Supports reports whether name is one of the type's interfaces of kind.
func (t *Type) Supports(kind Kind, name Interface) bool {
	return slices.Contains(t.Interfaces[kind], name)
}

// Has reports whether the type has capability c.
func (t *Type) Has(c Capability) bool { return slices.Contains(t.Capabilities, c) }

// SupportsSecureBoot reports whether a node of this type may have its
// secure boot state set (PUT .../states/secure_boot). ipmi may not: Ironic's
// ipmitool management refuses it with UnsupportedDriverExtension.
func (t *Type) SupportsSecureBoot() bool { return t.Has(CapSecureBoot) }

// RecordsBootModeAsAsked reports whether a boot mode or secure boot change
// is recorded as asked rather than set through a BMC and read back: an
// in-memory BMC has no firmware to set it in, and Ironic's fake
// management interface keeps what it is given.
func (t *Type) RecordsBootModeAsAsked() bool { return t.Has(CapInMemoryBMC) }

// SupportsVirtualMedia reports whether a node of hardware type driver,
// managed through its management interface, inserts virtual media on
// request (API 1.89's vmedia): the type's BMC does (redfish), or the
// management interface is fake, which accepts it as Ironic's fake
// management interface does. Ironic asks the node's management interface.
func SupportsVirtualMedia(driver string, management Interface) bool {
	if t, ok := Lookup(driver); ok && t.Has(CapVirtualMedia) {
		return true
	}
	return management == Fake
}

// AllKeys returns every driver_info key a node of this type may use: the
// type's own, then those of the interfaces it supports, in Ironic's kind
// order, each once.
func (t *Type) AllKeys() []Key {
	all := slices.Clone(t.Keys)
	seen := map[string]bool{}
	for _, k := range all {
		seen[k.Name] = true
	}
	for _, kind := range Kinds() {
		for _, name := range t.Interfaces[kind] {
			impl, _ := Implemented(kind, name)
			for _, k := range impl.Keys {
				if !seen[k.Name] {
					seen[k.Name] = true
					all = append(all, k)
				}
			}
		}
	}
	return all
}

// Required returns the names of the required driver_info keys, in order.
func (t *Type) Required() []string { return t.keyNames(true) }

// Optional returns the names of the other driver_info keys, in order.
func (t *Type) Optional() []string { return t.keyNames(false) }

func (t *Type) keyNames(required bool) []string {
	var names []string
	for _, k := range t.AllKeys() {
		if k.Required == required {
			names = append(names, k.Name)
		}
	}
	return names
}

// Properties maps every driver_info key to its description, as
// GET /v1/drivers/{name}/properties shows them.
func (t *Type) Properties() map[string]string {
	all := t.AllKeys()
	p := make(map[string]string, len(all))
	for _, k := range all {
		p[k.Name] = k.Description
	}
	return p
}

// Missing returns the required keys that info lacks or leaves empty, in
// order. A number counts as set (a JSON port arrives as float64).
func (t *Type) Missing(info map[string]any) []string {
	var missing []string
	for _, k := range t.Required() {
		if s, ok := Text(info, k); !ok || s == "" {
			missing = append(missing, k)
		}
	}
	return missing
}

// Text reads a driver_info key as text: strings trimmed, numbers written
// without a fraction when they have none; a nil value counts as absent.
func Text(info map[string]any, key string) (string, bool) {
	v, ok := info[key]
	if !ok || v == nil {
		return "", false
	}
	switch t := v.(type) {
	case string:
		return strings.TrimSpace(t), true
	case float64:
		if t == math.Trunc(t) {
			return strconv.FormatInt(int64(t), 10), true
		}
		return strconv.FormatFloat(t, 'f', -1, 64), true
	default:
		return fmt.Sprint(t), true
	}
}

// Check reports what makes t unfit for the registry: a missing name or
// kind, an interface ironflow does not implement, or one that needs a
// capability the type lacks.
func Check(t *Type) error {
	if t.Name == "" {
		return fmt.Errorf("hardware type without a name")
	}
	for _, kind := range Kinds() {
		names := t.Interfaces[kind]
		if len(names) == 0 {
			return fmt.Errorf("hardware type %s: no %s interface (give at least the no-op one)", t.Name, kind)
		}
		for _, name := range names {
			impl, ok := Implemented(kind, name)
			if !ok {
				return fmt.Errorf("hardware type %s: %s interface %q is not implemented by ironflow", t.Name, kind, name)
			}
			if impl.Needs != "" && !t.Has(impl.Needs) {
				return fmt.Errorf("hardware type %s: %s interface %q needs capability %s", t.Name, kind, name, impl.Needs)
			}
		}
	}
	for kind := range t.Interfaces {
		if !slices.Contains(Kinds(), kind) {
			return fmt.Errorf("hardware type %s: unknown interface kind %q", t.Name, kind)
		}
	}
	seen := map[string]bool{}
	for _, k := range t.Keys {
		if k.Name == "" || seen[k.Name] {
			return fmt.Errorf("hardware type %s: driver_info key %q empty or declared twice", t.Name, k.Name)
		}
		seen[k.Name] = true
	}
	return nil
}

// registry holds the hardware types by name. It is written by init
// functions only and read-only afterwards, so that it needs no lock and the
// workflows may read it.
var registry = struct{ types map[string]*Type }{types: map[string]*Type{}}

// Register adds a hardware type; each type's file calls it from init, and
// nothing calls it later. It panics when Check refuses the type or the name
// is taken: a registry that advertises what ironflow cannot run must not
// start.
func Register(t Type) {
	if err := Check(&t); err != nil {
		panic("hardware: " + err.Error())
	}
	if _, dup := registry.types[t.Name]; dup {
		panic("hardware: hardware type " + t.Name + " registered twice")
	}
	t.Keys = slices.Clone(t.Keys)
	t.Interfaces = maps.Clone(t.Interfaces)
	t.BootDevices = slices.Clone(t.BootDevices)
	t.Capabilities = slices.Clone(t.Capabilities)
	registry.types[t.Name] = &t
}

// Lookup returns the hardware type called name. Callers read it only.
func Lookup(name string) (*Type, bool) {
	t, ok := registry.types[name]
	return t, ok
}

// Names returns every registered hardware type's name, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry.types))
}
