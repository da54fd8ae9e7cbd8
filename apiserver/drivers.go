package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// Interface kinds of a node, in Ironic's order.
var interfaceKinds = []string{
	"bios", "boot", "console", "deploy", "firmware", "inspect", "management",
	"network", "power", "raid", "rescue", "storage", "vendor",
}

// ifaceChoice is what a hardware type accepts for one interface kind: the
// first entry is the default, as Ironic picks the first supported and
// enabled implementation.
type ifaceChoice []string

// hardwareType is one of ironflow's drivers with the interfaces it supports.
type hardwareType struct {
	name       string
	interfaces map[string]ifaceChoice
	// bootDevices are the devices /management/boot_device accepts.
	bootDevices []string
	// properties are the driver_info keys it documents
	// (GET /v1/drivers/{name}/properties).
	properties map[string]string
}

// hardwareTypes are the drivers ironflow implements. The defaults follow
// Ironic's hardware types with the interfaces ironflow has a real
// implementation of.
var hardwareTypes = map[string]*hardwareType{
	"ipmi": {
		name: "ipmi",
		interfaces: map[string]ifaceChoice{
			"bios": {"no-bios"}, "boot": {"ipxe", "pxe"}, "console": {"no-console"},
			"deploy": {"direct", "ramdisk", "anaconda"}, "firmware": {"no-firmware"},
			"inspect": {"no-inspect", "agent"}, "management": {"ipmitool", "noop"},
			"network": {"noop", "flat"}, "power": {"ipmitool"}, "raid": {"no-raid", "agent"},
			"rescue": {"no-rescue", "agent"}, "storage": {"noop"}, "vendor": {"no-vendor", "ipmitool"},
		},
		bootDevices: []string{"pxe", "disk", "cdrom", "bios", "safe"},
		properties: map[string]string{
			"ipmi_address":      "IP address or hostname of the node. Required.",
			"ipmi_username":     "username; default is NULL user. Optional.",
			"ipmi_password":     "password. Optional.",
			"ipmi_port":         "remote IPMI RMCP port. Optional.",
			"ipmi_cipher_suite": "IPMI cipher suite to use. Optional.",
			"deploy_kernel":     "URL or Glance UUID of the deployment kernel. Required.",
			"deploy_ramdisk":    "URL or Glance UUID of the ramdisk that is mounted at boot time. Required.",
		},
	},
	"redfish": {
		name: "redfish",
		interfaces: map[string]ifaceChoice{
			"bios": {"redfish", "no-bios"}, "boot": {"redfish-virtual-media", "ipxe", "pxe"},
			"console": {"no-console"}, "deploy": {"direct", "ramdisk", "anaconda"},
			"firmware": {"redfish", "no-firmware"}, "inspect": {"redfish", "agent", "no-inspect"},
			"management": {"redfish", "noop"}, "network": {"noop", "flat"}, "power": {"redfish"},
			"raid": {"redfish", "agent", "no-raid"}, "rescue": {"no-rescue", "agent"},
			"storage": {"noop"}, "vendor": {"redfish", "no-vendor"},
		},
		bootDevices: []string{"pxe", "disk", "cdrom", "bios"},
		properties: map[string]string{
			"redfish_address":   "The URL address to the Redfish controller. Required.",
			"redfish_system_id": "The canonical path to the ComputerSystem resource. Optional.",
			"redfish_username":  "User account with admin/server-profile access privilege. Optional.",
			"redfish_password":  "User account password. Optional.",
			"redfish_verify_ca": "Either a Boolean value, a path to a CA_BUNDLE file or directory. Optional.",
			"deploy_kernel":     "URL or Glance UUID of the deployment kernel. Required.",
			"deploy_ramdisk":    "URL or Glance UUID of the ramdisk that is mounted at boot time. Required.",
		},
	},
	"fake-hardware": {
		name: "fake-hardware",
		interfaces: map[string]ifaceChoice{
			"bios": {"fake", "no-bios"}, "boot": {"fake", "ipxe", "pxe"}, "console": {"fake", "no-console"},
			"deploy": {"fake", "direct", "ramdisk", "anaconda"}, "firmware": {"fake", "no-firmware"},
			"inspect": {"fake", "agent", "no-inspect"}, "management": {"fake", "noop"},
			"network": {"noop", "flat"}, "power": {"fake"}, "raid": {"fake", "agent", "no-raid"},
			"rescue": {"fake", "agent", "no-rescue"}, "storage": {"noop"}, "vendor": {"fake", "no-vendor"},
		},
		bootDevices: []string{"pxe", "disk"},
		properties:  map[string]string{},
	},
}

// nodeIfaces gives access to a node's interface fields by kind.
func nodeIfaces(n *store.Node) map[string]*string {
	return map[string]*string{
		"bios": &n.BIOSInterface, "boot": &n.BootInterface, "console": &n.ConsoleInterface,
		"deploy": &n.DeployInterface, "firmware": &n.FirmwareInterface, "inspect": &n.InspectInterface,
		"management": &n.ManagementInterface, "network": &n.NetworkInterface, "power": &n.PowerInterface,
		"raid": &n.RAIDInterface, "rescue": &n.RescueInterface, "storage": &n.StorageInterface,
		"vendor": &n.VendorInterface,
	}
}

// driver returns the hardware type name names, if this API accepts it.
func (s *server) driver(name string) (*hardwareType, bool) {
	ht, ok := hardwareTypes[name]
	if !ok {
		return nil, false
	}
	if len(s.cfg.AllowedDrivers) > 0 && !slices.Contains(s.cfg.AllowedDrivers, name) {
		return nil, false
	}
	return ht, true
}

func noConductorForDriver(driver, group string) *apiError {
	return badRequest("No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"%s\".", driver, group)
}

// applyInterfaces checks the node's driver and interfaces: empty interfaces
// get the driver's default, set ones must be supported. When resetUnset is
// true (driver changed), interfaces not valid for the new driver are reset
// to its defaults, as Ironic resets interfaces on a driver change.
func (s *server) applyInterfaces(n *store.Node, explicit map[string]bool) error {
	ht, ok := s.driver(n.Driver)
	if !ok {
		return noConductorForDriver(n.Driver, n.ConductorGroup)
	}
	ifs := nodeIfaces(n)
	for _, kind := range interfaceKinds {
		p := ifs[kind]
		choice := ht.interfaces[kind]
		if *p == "" || (!explicit[kind] && !slices.Contains(choice, *p)) {
			*p = choice[0]
			continue
		}
		if !slices.Contains(choice, *p) {
			return badRequest("Could not find the following interface in the 'ironic.hardware.interfaces.%s' entrypoint: %s. Valid interfaces are %s.",
				kind, *p, pyList(choice))
		}
	}
	return nil
}

// pyList renders strings as Python prints a list: ['a', 'b'].
func pyList(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = "'" + it + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// validateNode answers GET /v1/nodes/{id}/validate: every interface
// with {result, reason}. Checks are on the node's data only: the API never
// talks to the BMC.
func validateNode(n *store.Node) map[string]map[string]any {
	ok := func() map[string]any { return map[string]any{"result": true} }
	fail := func(reason string) map[string]any { return map[string]any{"result": false, "reason": reason} }
	unsupported := func(iface string) map[string]any {
		return map[string]any{"result": nil, "reason": iface + " interface is not supported"}
	}
	out := map[string]map[string]any{}
	str := func(m map[string]any, k string) string {
		v, _ := m[k].(string)
		return strings.TrimSpace(v)
	}
	missing := func(m map[string]any, keys ...string) []string {
		var miss []string
		for _, k := range keys {
			if str(m, k) == "" {
				miss = append(miss, k)
			}
		}
		return miss
	}

	// power and management: the BMC credentials.
	switch n.PowerInterface {
	case "ipmitool":
		if miss := missing(n.DriverInfo, "ipmi_address"); len(miss) > 0 {
			out["power"] = fail(fmt.Sprintf("Missing the following IPMI credentials in node's driver_info: %s.", pyList(miss)))
		} else {
			out["power"] = ok()
		}
	case "redfish":
		if miss := missing(n.DriverInfo, "redfish_address"); len(miss) > 0 {
			out["power"] = fail(fmt.Sprintf("Missing the following Redfish properties in node %s driver_info: %s", n.UUID, pyList(miss)))
		} else if addr := str(n.DriverInfo, "redfish_address"); !strings.Contains(addr, "://") && strings.ContainsAny(addr, " /") {
			out["power"] = fail(fmt.Sprintf("Invalid Redfish address %s set in driver_info/redfish_address on node %s", addr, n.UUID))
		} else {
			out["power"] = ok()
		}
	default:
		out["power"] = ok()
	}
	switch n.ManagementInterface {
	case "ipmitool", "redfish":
		out["management"] = out["power"]
	case "noop":
		out["management"] = ok()
	default:
		out["management"] = ok()
	}

	// boot: network boot needs the agent's kernel and ramdisk. ironflow's
	// boot service serves its own agent; driver_info deploy_kernel and
	// deploy_ramdisk override it, and must then come as a pair.
	switch n.BootInterface {
	case "pxe", "ipxe", "redfish-virtual-media":
		if miss := missing(n.DriverInfo, "deploy_kernel", "deploy_ramdisk"); len(miss) == 1 {
			out["boot"] = fail(fmt.Sprintf("Some parameters were missing in node's driver_info. Missing are: %s", pyList(miss)))
		} else {
			out["boot"] = ok()
		}
	default:
		out["boot"] = ok()
	}

	// deploy: an image to write.
	switch n.DeployInterface {
	case "direct", "ramdisk", "anaconda":
		key := "image_source"
		if n.DeployInterface == "ramdisk" {
			if str(n.InstanceInfo, "boot_iso") != "" || str(n.InstanceInfo, "kernel") != "" {
				out["deploy"] = ok()
				break
			}
		}
		if str(n.InstanceInfo, key) == "" {
			out["deploy"] = fail(fmt.Sprintf("Cannot validate image information for node %s because one or more parameters are missing from its instance_info. Missing are: %s", n.UUID, pyList([]string{key})))
		} else {
			out["deploy"] = ok()
		}
	default:
		out["deploy"] = ok()
	}

	for _, kind := range []string{"bios", "console", "inspect", "network", "raid", "rescue", "storage", "firmware"} {
		impl := *nodeIfaces(n)[kind]
		if strings.HasPrefix(impl, "no-") {
			out[kind] = unsupported(kind)
		} else {
			out[kind] = ok()
		}
	}
	return out
}

// driverBody renders one driver as GET /v1/drivers shows it.
func (s *server) driverBody(c *gin.Context, ht *hardwareType, detail bool) map[string]any {
	base := s.baseURL(c)
	d := map[string]any{
		"name":  ht.name,
		"hosts": []string{s.cfg.ConductorName},
		"links": selfLinks(base, "drivers/"+ht.name),
	}
	if ver(c) >= v14StateLinks {
		d["properties"] = selfLinks(base, "drivers/"+ht.name+"/properties")
	}
	if ver(c) >= v30DynamicDrivers {
		d["type"] = "dynamic"
		if detail {
			for _, kind := range interfaceKinds {
				if kind == "firmware" {
					continue // firmware_interface appears at 1.86
				}
				if kind == "bios" && ver(c) < v40BIOSIface || kind == "rescue" && ver(c) < v38RescueIface ||
					kind == "storage" && ver(c) < v33StorageIface {
					continue
				}
				choice := ht.interfaces[kind]
				enabled := slices.Clone([]string(choice))
				sort.Strings(enabled)
				d["default_"+kind+"_interface"] = choice[0]
				d["enabled_"+kind+"_interfaces"] = enabled
			}
		}
	}
	return d
}

func (s *server) listDrivers(c *gin.Context) {
	detail := false
	if v := c.Query("detail"); v != "" {
		if ver(c) < v30DynamicDrivers {
			s.writeError(c, notAcceptable())
			return
		}
		b, err := parseBool("detail", v)
		if err != nil {
			s.writeError(c, err)
			return
		}
		detail = b
	}
	if t := c.Query("type"); t != "" && t != "dynamic" {
		writeJSON(c, http.StatusOK, map[string]any{"drivers": []any{}})
		return
	}
	names := make([]string, 0, len(hardwareTypes))
	for name := range hardwareTypes {
		if _, ok := s.driver(name); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]any, 0, len(names))
	for _, name := range names {
		out = append(out, s.driverBody(c, hardwareTypes[name], detail))
	}
	writeJSON(c, http.StatusOK, map[string]any{"drivers": out})
}

func (s *server) showDriver(c *gin.Context) {
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		s.writeError(c, errorf(http.StatusNotFound, "Could not find the following driver(s) or hardware type(s): %s.", c.Param("name")))
		return
	}
	writeJSON(c, http.StatusOK, s.driverBody(c, ht, true))
}

func (s *server) driverProperties(c *gin.Context) {
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		s.writeError(c, errorf(http.StatusNotFound, "Could not find the following driver(s) or hardware type(s): %s.", c.Param("name")))
		return
	}
	writeJSON(c, http.StatusOK, ht.properties)
}

// listConductors answers GET /v1/conductors with an empty list: ironflow's
// workers are Temporal workers the API does not track, and listing invented
// ones would mislead operators.
func (s *server) listConductors(c *gin.Context) {
	if ver(c) < v49Conductors {
		s.writeError(c, resourceNotFound())
		return
	}
	writeJSON(c, http.StatusOK, map[string]any{"conductors": []any{}})
}

func (s *server) showConductor(c *gin.Context) {
	if ver(c) < v49Conductors {
		s.writeError(c, resourceNotFound())
		return
	}
	s.writeError(c, errorf(http.StatusNotFound, "Conductor %s could not be found.", c.Param("name")))
}
