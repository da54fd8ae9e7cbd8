package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// The hardware types, their interfaces and driver_info keys are declared in
// package hardware; this file shows them (GET /v1/drivers) and checks nodes
// against them (docs/contributing.md, "Add a BMC driver").

// nodeIfaces gives access to a node's interface fields by kind.
func nodeIfaces(n *store.Node) map[hardware.Kind]*string {
	return map[hardware.Kind]*string{
		hardware.KindBIOS: &n.BIOSInterface, hardware.KindBoot: &n.BootInterface, hardware.KindConsole: &n.ConsoleInterface,
		hardware.KindDeploy: &n.DeployInterface, hardware.KindFirmware: &n.FirmwareInterface, hardware.KindInspect: &n.InspectInterface,
		hardware.KindManagement: &n.ManagementInterface, hardware.KindNetwork: &n.NetworkInterface, hardware.KindPower: &n.PowerInterface,
		hardware.KindRAID: &n.RAIDInterface, hardware.KindRescue: &n.RescueInterface, hardware.KindStorage: &n.StorageInterface,
		hardware.KindVendor: &n.VendorInterface,
	}
}

// driver returns the hardware type called name, if this API accepts it.
func (s *server) driver(name string) (*hardware.Type, bool) {
	ht, ok := hardware.Lookup(name)
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
// get the driver's default, set ones must be supported. Interfaces not set
// explicitly that the driver does not support (driver changed) are reset to
// its defaults, as Ironic resets interfaces on a driver change.
func (s *server) applyInterfaces(n *store.Node, explicit map[string]bool) error {
	ht, ok := s.driver(n.Driver)
	if !ok {
		return noConductorForDriver(n.Driver, n.ConductorGroup)
	}
	ifs := nodeIfaces(n)
	for _, kind := range hardware.Kinds() {
		p := ifs[kind]
		name := hardware.Interface(*p)
		if name == "" || (!explicit[string(kind)] && !ht.Supports(kind, name)) {
			*p = string(ht.Default(kind))
			continue
		}
		if !ht.Supports(kind, name) {
			return badRequest("Could not find the following interface in the 'ironic.hardware.interfaces.%s' entrypoint: %s. Valid interfaces are %s.",
				kind, *p, pyliteral.List(interfaceNames(ht.Supported(kind))))
		}
	}
	return nil
}

func interfaceNames(ifs []hardware.Interface) []string {
	names := make([]string, len(ifs))
	for i, name := range ifs {
		names[i] = string(name)
	}
	return names
}

// missingCredentials words a power interface's missing driver_info keys as
// Ironic's interface of that name does; others get missingProperties.
var missingCredentials = map[hardware.Interface]func(node string, miss []string) string{
	hardware.IPMITool: func(_ string, miss []string) string {
		return fmt.Sprintf("Missing the following IPMI credentials in node's driver_info: %s.", pyliteral.List(miss))
	},
	hardware.Redfish: func(node string, miss []string) string {
		return fmt.Sprintf("Missing the following Redfish properties in node %s driver_info: %s", node, pyliteral.List(miss))
	},
}

func missingProperties(_ string, miss []string) string {
	return fmt.Sprintf("Missing the following properties in node's driver_info: %s.", pyliteral.List(miss))
}

// validateNode answers GET /v1/nodes/{id}/validate: every interface
// with {result, reason}. Checks are on the node's data only: the API never
// talks to the BMC. imageProblem is what Glance said of the deploy's image
// (glanceImageProblem), "" when nothing is wrong with it.
func validateNode(n *store.Node, imageProblem string) map[string]map[string]any {
	ok := func() map[string]any { return map[string]any{"result": true} }
	fail := func(reason string) map[string]any { return map[string]any{"result": false, "reason": reason} }
	unsupported := func(iface string) map[string]any {
		return map[string]any{"result": nil, "reason": iface + " interface is not supported"}
	}
	out := map[string]map[string]any{}
	str := func(m map[string]any, k string) string {
		v, _ := hardware.Text(m, k)
		return v
	}
	ht, known := hardware.Lookup(n.Driver)

	// power and management: the hardware type's required driver_info keys
	// (the BMC's address and credentials).
	out["power"] = ok()
	if known {
		power := hardware.Interface(n.PowerInterface)
		impl, _ := hardware.Implemented(hardware.KindPower, power)
		if miss := ht.Missing(n.DriverInfo); len(miss) > 0 {
			reason, worded := missingCredentials[power]
			if !worded {
				reason = missingProperties
			}
			out["power"] = fail(reason(n.UUID, miss))
		} else if problem := impl.InfoProblem(n.UUID, n.DriverInfo); problem != "" {
			out["power"] = fail(problem)
		}
	}
	out["management"] = ok()
	if impl, _ := hardware.Implemented(hardware.KindManagement, hardware.Interface(n.ManagementInterface)); impl.UsesBMC() {
		out["management"] = out["power"]
	}

	// boot: network boot needs the agent's kernel and ramdisk. ironflow's
	// boot service serves its own agent; driver_info deploy_kernel and
	// deploy_ramdisk override it, and must then come as a pair.
	out["boot"] = ok()
	if impl, _ := hardware.Implemented(hardware.KindBoot, hardware.Interface(n.BootInterface)); impl.Reads(hardware.KeyDeployKernel) {
		var miss []string
		for _, k := range []string{hardware.KeyDeployKernel, hardware.KeyDeployRamdisk} {
			if str(n.DriverInfo, k) == "" {
				miss = append(miss, k)
			}
		}
		if len(miss) == 1 {
			out["boot"] = fail(fmt.Sprintf("Some parameters were missing in node's driver_info. Missing are: %s", pyliteral.List(miss)))
		}
	}

	// deploy: an image to write.
	out["deploy"] = ok()
	deploy := hardware.DeployOf(hardware.Interface(n.DeployInterface))
	switch flow := deploy.Flow(); flow {
	case hardware.FlowAgent, hardware.FlowRamdisk, hardware.FlowInstaller:
		key := "image_source"
		if flow == hardware.FlowAgent && !deploy.WritesImage() {
			// custom-agent: the user's deploy steps bring what the
			// machine runs; no image to check (Ironic's
			// CustomAgentDeploy.validate).
			break
		}
		if flow == hardware.FlowRamdisk && (str(n.InstanceInfo, "boot_iso") != "" || str(n.InstanceInfo, "kernel") != "") {
			break
		}
		if str(n.InstanceInfo, key) == "" {
			out["deploy"] = fail(fmt.Sprintf("Cannot validate image information for node %s because one or more parameters are missing from its instance_info. Missing are: %s", n.UUID, pyliteral.List([]string{key})))
		} else if imageProblem != "" {
			out["deploy"] = fail(imageProblem)
		}
	}
	// Ironic's validate_driver_interfaces checks the instance traits once
	// the deploy interface validated.
	if msg := instanceTraitsProblem(n); msg != "" && out["deploy"]["result"] == true {
		out["deploy"] = fail(msg)
	}

	// storage: noop is the only storage interface enabled (cinder is not
	// implemented). Ironic's noop storage interface validates true and
	// ignores the node's volume targets: the deploy writes the image as
	// without them; only cinder would attach and boot from them.
	for _, kind := range []hardware.Kind{hardware.KindBIOS, hardware.KindConsole, hardware.KindInspect, hardware.KindNetwork,
		hardware.KindRAID, hardware.KindRescue, hardware.KindStorage, hardware.KindFirmware} {
		impl := *nodeIfaces(n)[kind]
		if strings.HasPrefix(impl, "no-") {
			out[string(kind)] = unsupported(string(kind))
		} else {
			out[string(kind)] = ok()
		}
	}
	return out
}

// driverBody renders one driver as GET /v1/drivers shows it.
// hosts are the hostnames of the live conductors (workers) that run each
// driver, as Ironic lists them.
func (s *server) driverBody(c *gin.Context, ht *hardware.Type, detail bool, hosts map[string][]string) map[string]any {
	base := s.baseURL(c)
	h := hosts[ht.Name]
	if h == nil {
		h = []string{}
	}
	d := map[string]any{
		"name":  ht.Name,
		"hosts": h,
		"links": selfLinks(base, "drivers/"+ht.Name),
	}
	if ver(c) >= v14StateLinks {
		d["properties"] = selfLinks(base, "drivers/"+ht.Name+"/properties")
	}
	if ver(c) >= v30DynamicDrivers {
		d["type"] = "dynamic"
		if detail {
			for _, kind := range hardware.Kinds() {
				if kind == hardware.KindFirmware && ver(c) < v86FirmwareInterface {
					continue
				}
				if kind == hardware.KindBIOS && ver(c) < v40BIOSIface || kind == hardware.KindRescue && ver(c) < v38RescueIface ||
					kind == hardware.KindStorage && ver(c) < v33StorageIface {
					continue
				}
				enabled := interfaceNames(ht.Supported(kind))
				sort.Strings(enabled)
				d["default_"+string(kind)+"_interface"] = string(ht.Default(kind))
				d["enabled_"+string(kind)+"_interfaces"] = enabled
			}
		}
	}
	return d
}

// driverQuery is what GET /v1/drivers[/{name}] reads from its query,
// checked in the order of Ironic's DriversController (driver.py).
type driverQuery struct {
	detail bool
	// fields: ?fields= (1.77), lowercased and without repeats, as
	// args.string_list gives them; nil when absent.
	fields []string
	// none: ?type= names no type ironflow has (classic drivers are gone).
	none bool
}

func readDriverQuery(c *gin.Context, list bool) (driverQuery, error) {
	var q driverQuery
	if v, ok := c.GetQuery("fields"); ok {
		q.fields = []string{}
		for _, f := range strings.Split(v, ",") {
			if f = strings.ToLower(strings.TrimSpace(f)); f != "" && !slices.Contains(q.fields, f) {
				q.fields = append(q.fields, f)
			}
		}
	}
	if list {
		vals, hasDetail := c.GetQueryArray("detail")
		if hasDetail {
			var err error
			if q.detail, err = argsBoolean("detail", vals); err != nil {
				return q, err
			}
		}
		if len(q.fields) > 0 && q.detail {
			return q, badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		t, hasType := c.GetQuery("type")
		if (hasDetail || hasType) && ver(c) < v30DynamicDrivers {
			return q, errorf(http.StatusNotAcceptable, "Request not acceptable. The minimal required API version should be %s", versionString(v30DynamicDrivers))
		}
		if q.fields != nil && ver(c) < v77DriverFields {
			return q, notAcceptable()
		}
		switch t {
		case "", "dynamic":
		case "classic":
			q.none = true
		default:
			return q, badRequest(`"type" filter must be one of "classic" or "dynamic", if specified.`)
		}
		return q, nil
	}
	if q.fields != nil && ver(c) < v77DriverFields {
		return q, notAcceptable()
	}
	return q, nil
}

// selectDriverFields keeps the requested fields of a driver's body and its
// links, as Ironic's driver_sanitize does, and refuses a field the body
// does not have.
func selectDriverFields(d map[string]any, fields []string) error {
	if fields == nil {
		return nil
	}
	var bad []string
	for _, f := range fields {
		if _, ok := d[f]; !ok {
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		return badRequest("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
	}
	for k := range d {
		if k != "links" && !slices.Contains(fields, k) {
			delete(d, k)
		}
	}
	return nil
}

func (s *server) listDrivers(c *gin.Context) {
	q, err := readDriverQuery(c, true)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if q.none {
		writeJSON(c, http.StatusOK, map[string]any{"drivers": []any{}})
		return
	}
	hosts, err := s.driverHosts(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := []any{}
	for _, name := range hardware.Names() {
		if ht, ok := s.driver(name); ok {
			d := s.driverBody(c, ht, q.detail, hosts)
			if err := selectDriverFields(d, q.fields); err != nil {
				s.writeError(c, err)
				return
			}
			out = append(out, d)
		}
	}
	writeJSON(c, http.StatusOK, map[string]any{"drivers": out})
}

func (s *server) showDriver(c *gin.Context) {
	q, err := readDriverQuery(c, false)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		s.writeError(c, errorf(http.StatusNotFound, "Could not find the following driver(s) or hardware type(s): %s.", c.Param("name")))
		return
	}
	hosts, err := s.driverHosts(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	d := s.driverBody(c, ht, true, hosts)
	if err := selectDriverFields(d, q.fields); err != nil {
		s.writeError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, d)
}

// driverHosts maps each driver to the sorted hostnames of the live
// conductors that run it. A driver no live worker runs is still listed,
// with no hosts: every ironflow binary carries every driver, so it is
// available as soon as a worker starts (Ironic hides such a driver).
func (s *server) driverHosts(c *gin.Context) (map[string][]string, error) {
	live, err := s.store.LiveConductors(c.Request.Context(), s.cfg.ConductorHeartbeatTimeout)
	if err != nil {
		return nil, fmt.Errorf("read conductors: %w", err)
	}
	hosts := map[string][]string{}
	for _, cd := range live { // sorted by hostname
		for _, d := range cd.Drivers {
			hosts[d] = append(hosts[d], cd.Hostname)
		}
	}
	return hosts, nil
}

func (s *server) driverProperties(c *gin.Context) {
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		s.writeError(c, errorf(http.StatusNotFound, "Could not find the following driver(s) or hardware type(s): %s.", c.Param("name")))
		return
	}
	writeJSON(c, http.StatusOK, ht.Properties())
}
