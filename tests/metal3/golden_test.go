package metal3

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	"github.com/ironflow/ironflow/tests/metal3/bmo"
)

// want is one call of the golden list, typed from BMO v0.13.2's
// pkg/provisioner/ironic and the reference of its calls, not captured
// from the client: its method, its path (with {node} for the node's
// UUID, {name} for namespace~name, {bare} for the name alone), its query
// (nil: none), whether it carries the chosen microversion (every call but
// version discovery), the top-level keys of its JSON body (for a PATCH:
// "op path" of every operation, in any order), values some keys must
// have, and the keys objects in the body must have.
type want struct {
	Method, Path string
	Query        url.Values
	Unversioned  bool
	Body         []string
	Values       map[string]any
	Nested       map[string][]string
	// Repeat: one or more times in a row (BMO polls); Optional: may be
	// absent (with Repeat: zero or more).
	Repeat, Optional bool
	// Group, when set, is a sequence matched as one item (a polling pass
	// of several calls).
	Group []want
}

func get(path string) want { return want{Method: "GET", Path: path} }

// pollNode: BMO reads the node on every requeued pass.
var pollNode = want{Method: "GET", Path: "/v1/nodes/{node}", Repeat: true}

func provision(target string, keys ...string) want {
	return want{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: append([]string{"target"}, keys...), Values: map[string]any{"target": target}}
}

func power(target string, keys ...string) want {
	return want{Method: "PUT", Path: "/v1/nodes/{node}/states/power", Body: append([]string{"target"}, keys...), Values: map[string]any{"target": target}}
}

func patch(ops ...string) want { return want{Method: "PATCH", Path: "/v1/nodes/{node}", Body: ops} }

// hasCapacity is BMO's busy-host count before inspection, provisioning
// and deprovisioning of a host that is not on virtual media.
var hasCapacity = want{Method: "GET", Path: "/v1/nodes", Query: url.Values{"fields": {"uuid,name,provision_state,boot_interface"}}}

// goldenInit is TryInit: discovery without a version header, then the
// drivers list at the chosen version.
var goldenInit = []want{{Method: "GET", Path: "/v1/", Unversioned: true}, get("/v1/drivers")}

// goldenRegister is a new host's registration through to manageable and
// its configuration (driver fake-hardware, which leaves every interface
// to the API's defaults, a boot MAC, deploy kernel and ramdisk set).
func goldenRegister(mac string) []want {
	return goldenRegisterWith(mac, nil, map[string]any{"driver": "fake-hardware"})
}

// goldenRegisterWith is goldenRegister for a BMC kind whose create sets
// the interfaces in ifaces, with the create's values in values.
func goldenRegisterWith(mac string, ifaces []string, values map[string]any) []want {
	vals := map[string]any{"inspect_interface": "agent", "disable_power_off": false}
	for k, v := range values {
		vals[k] = v
	}
	return []want{
		get("/v1/nodes/{name}"), get("/v1/nodes/{bare}"),
		{Method: "GET", Path: "/v1/ports", Query: url.Values{"address": {mac}, "fields": {"node_uuid"}}},
		{Method: "POST", Path: "/v1/nodes", Body: append([]string{"disable_power_off", "driver", "driver_info", "inspect_interface", "name", "properties"}, ifaces...),
			Values: vals, Nested: map[string][]string{"properties": {"capabilities", "cpu_arch"}}},
		{Method: "POST", Path: "/v1/ports", Body: []string{"address", "node_uuid", "pxe_enabled"}, Values: map[string]any{"address": mac, "pxe_enabled": true}},
		provision("manage"),
		// Every later pass finds the node by its ID and checks its port.
		{Repeat: true, Group: []want{get("/v1/nodes/{node}"), {Method: "GET", Path: "/v1/ports", Query: url.Values{"node_uuid": {"{node}"}, "fields": {"node_uuid"}}}}},
		patch("add /driver_info/deploy_kernel", "add /driver_info/deploy_ramdisk", "add /automated_clean"),
	}
}

// goldenFirmware is GetFirmwareSettings with its schema, then
// GetFirmwareComponents (fake-hardware's firmware interface is fake).
var goldenFirmware = []want{
	get("/v1/nodes/{node}"), {Method: "GET", Path: "/v1/nodes/{node}/bios", Query: url.Values{"detail": {"true"}}},
	get("/v1/nodes/{node}"), get("/v1/nodes/{node}/firmware"),
}

// goldenInspect: the capacity check, a 404 inventory, inspect, polling
// through inspecting and inspect wait, then the inventory.
var goldenInspect = []want{
	hasCapacity,
	get("/v1/nodes/{node}"), get("/v1/nodes/{node}/inventory"), provision("inspect"),
	pollNode, get("/v1/nodes/{node}/inventory"),
}

// goldenPrepareManualClean: BMO's startManualCleaning from manageable:
// the target RAID configuration (the RAID interface is the driver's
// already), then clean with BMO's steps, polling through cleaning.
var goldenPrepareManualClean = []want{
	get("/v1/nodes/{node}"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/raid", Body: []string{"logical_disks"}},
	{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: []string{"clean_steps", "target"}, Values: map[string]any{"target": "clean"}},
	pollNode,
}

// goldenService: BMO's startServicing from active: service with BMO's
// steps, polling through servicing (and service wait) back to active.
var goldenService = []want{
	get("/v1/nodes/{node}"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: []string{"service_steps", "target"}, Values: map[string]any{"target": "service"}},
	pollNode,
}

// goldenPrepare: nothing to configure, the node is only read.
var goldenPrepare = []want{get("/v1/nodes/{node}")}

// goldenProvision: provide from manageable, polling through automated
// cleaning to available, instance_info, validation, active with a JSON
// config drive, polling to active.
var goldenProvision = []want{
	hasCapacity,
	get("/v1/nodes/{node}"), provision("provide"),
	pollNode,
	patch("add /instance_uuid", "add /instance_info/capabilities", "add /instance_info/root_device",
		"add /instance_info/image_source", "add /instance_info/image_os_hash_algo", "add /instance_info/image_os_hash_value",
		"add /instance_info/image_disk_format", "add /driver_info/force_persistent_boot_device"),
	get("/v1/nodes/{node}/validate"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: []string{"configdrive", "target"}, Values: map[string]any{"target": "active"},
		Nested: map[string][]string{"configdrive": {"meta_data", "network_data", "user_data"}}},
	pollNode,
}

// goldenRegisterSteady is the Register pass BMO makes before the action
// of every reconcile once the node exists: the node by its ID and its
// ports; no PATCH, since nothing BMO set has changed (a field the API
// rewrites would be patched again on every pass).
var goldenRegisterSteady = []want{
	get("/v1/nodes/{node}"),
	{Method: "GET", Path: "/v1/ports", Query: url.Values{"node_uuid": {"{node}"}, "fields": {"node_uuid"}}},
}

// goldenSoftPowerOff: soft power off with BMO's 180 s timeout; a 400
// makes BMO send a hard power off in the same pass; then polling.
var goldenSoftPowerOff = []want{
	get("/v1/nodes/{node}"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/power", Body: []string{"target", "timeout"}, Values: map[string]any{"target": "soft power off", "timeout": float64(180)}},
	withOptional(power("power off")),
	pollNode,
}

var goldenPowerOn = []want{get("/v1/nodes/{node}"), power("power on"), pollNode}

// goldenDeprovision: deleted from active, polling through deleting and
// cleaning to available (automated_clean already matches the mode).
var goldenDeprovision = []want{hasCapacity, get("/v1/nodes/{node}"), provision("deleted"), pollNode}

// goldenPowerOffBeforeDelete: a node already off is only read.
var goldenPowerOffBeforeDelete = []want{get("/v1/nodes/{node}"), withOptional(power("power off")), withOptional(pollNode)}

// goldenDeleteAvailable: a stale instance_uuid removed (Ironic clears it
// at teardown, so usually absent), DELETE, and the 404 that ends it.
var goldenDeleteAvailable = []want{get("/v1/nodes/{node}"), withOptional(patch("remove /instance_uuid")),
	{Method: "DELETE", Path: "/v1/nodes/{node}"}, get("/v1/nodes/{node}")}

// goldenAdopt: adopt from manageable, polling through adopting to active.
var goldenAdopt = []want{get("/v1/nodes/{node}"), provision("adopt"), pollNode}

// goldenDeleteActive: an adopted (active) node goes to maintenance with
// BMO's reason before DELETE.
var goldenDeleteActive = []want{
	get("/v1/nodes/{node}"),
	{Method: "PUT", Path: "/v1/nodes/{node}/maintenance", Body: []string{"reason"}, Values: map[string]any{"reason": "forcing deletion in baremetal-operator"}},
	get("/v1/nodes/{node}"), {Method: "DELETE", Path: "/v1/nodes/{node}"}, get("/v1/nodes/{node}"),
}

// goldenProvisionLiveISO: a live ISO (BMO's setLiveIsoUpdateOptsForNode):
// provide, instance_info boot_iso and the ramdisk deploy interface,
// validation, active with the empty config drive BMO sends for a live ISO.
var goldenProvisionLiveISO = []want{
	hasCapacity,
	get("/v1/nodes/{node}"), provision("provide"),
	pollNode,
	patch("add /instance_uuid", "add /instance_info/capabilities", "add /instance_info/root_device",
		"add /instance_info/boot_iso", "add /deploy_interface", "add /driver_info/force_persistent_boot_device"),
	get("/v1/nodes/{node}/validate"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: []string{"configdrive", "target"}, Values: map[string]any{"target": "active"}},
	pollNode,
}

// dataImageStatus is one GetDataImageStatus pass: the node, then its
// virtual media unless the node is reserved.
var dataImageStatus = want{Repeat: true, Group: []want{get("/v1/nodes/{node}"), withOptional(get("/v1/nodes/{node}/vmedia"))}}

// goldenDataImage: BMO's DataImage reconciler attaches the image as a CD,
// reads the status until inserted, detaches every CD, reads it until
// ejected.
var goldenDataImage = []want{
	{Method: "POST", Path: "/v1/nodes/{node}/vmedia", Body: []string{"device_type", "image_url"}, Values: map[string]any{"device_type": "cdrom"}},
	dataImageStatus,
	{Method: "DELETE", Path: "/v1/nodes/{node}/vmedia", Query: url.Values{"device_types": {"cdrom"}}},
	dataImageStatus,
}

// goldenBMCEventSubscription: BMO's BMCEventSubscription controller
// creates the subscription through the node's vendor passthru and deletes
// it by the ID it kept.
var goldenBMCEventSubscription = []want{
	{Method: "POST", Path: "/v1/nodes/{node}/vendor_passthru", Query: url.Values{"method": {"create_subscription"}}, Body: []string{"Context", "Destination", "HttpHeaders"}},
	{Method: "DELETE", Path: "/v1/nodes/{node}/vendor_passthru", Query: url.Values{"method": {"delete_subscription"}}, Body: []string{"id"}},
}

func withOptional(w want) want {
	w.Optional = true
	return w
}

// subst fills a golden path or query value in for the host.
type subst struct{ node, name, bare, version string }

func (s subst) fill(p string) string {
	return strings.NewReplacer("{node}", s.node, "{name}", s.name, "{bare}", s.bare).Replace(p)
}

// matchCall says why c is not w ("" if it is).
func (s subst) matchCall(w want, c bmo.Call) string {
	if c.Method != w.Method || c.Path != s.fill(w.Path) {
		return fmt.Sprintf("want %s %s", w.Method, s.fill(w.Path))
	}
	q, _ := url.ParseQuery(c.Query)
	wq := url.Values{}
	for k, vs := range w.Query {
		for _, v := range vs {
			wq.Add(k, s.fill(v))
		}
	}
	if len(q) != 0 || len(wq) != 0 {
		if !reflect.DeepEqual(q, wq) {
			return fmt.Sprintf("query %v, want %v", q, wq)
		}
	}
	switch {
	case w.Unversioned && c.Version != "":
		return fmt.Sprintf("version header %q, want none", c.Version)
	case !w.Unversioned && c.Version != s.version:
		return fmt.Sprintf("version header %q, want %q", c.Version, s.version)
	}
	if got := bodyKeys(c.Body); !reflect.DeepEqual(got, sorted(w.Body)) {
		return fmt.Sprintf("body keys %v, want %v", got, sorted(w.Body))
	}
	obj, _ := c.Body.(map[string]any)
	for k, v := range w.Values {
		if !reflect.DeepEqual(obj[k], v) {
			return fmt.Sprintf("body %s = %#v, want %#v", k, obj[k], v)
		}
	}
	for k, keys := range w.Nested {
		inner, _ := obj[k].(map[string]any)
		var got []string
		for ik := range inner {
			got = append(got, ik)
		}
		if !reflect.DeepEqual(sorted(got), sorted(keys)) {
			return fmt.Sprintf("body %s keys %v, want %v", k, sorted(got), sorted(keys))
		}
	}
	return ""
}

// bodyKeys are an object's keys, or a JSON patch's "op path"s, sorted.
func bodyKeys(b any) []string {
	var keys []string
	switch v := b.(type) {
	case map[string]any:
		for k := range v {
			keys = append(keys, k)
		}
	case []any:
		for _, op := range v {
			m, _ := op.(map[string]any)
			keys = append(keys, fmt.Sprintf("%v %v", m["op"], m["path"]))
		}
	}
	return sorted(keys)
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// match reports whether calls are exactly the golden sequence, with the
// furthest point it reached and why it stopped there otherwise.
func (s subst) match(golden []want, calls []bmo.Call) (bool, string) {
	best, why := -1, ""
	var rec func(g []want, i int) bool
	rec = func(g []want, i int) bool {
		if i > best {
			best = i
		}
		if len(g) == 0 {
			if i != len(calls) {
				why = fmt.Sprintf("call %d unexpected: the golden list has ended", i)
			}
			return i == len(calls)
		}
		w, rest := g[0], g[1:]
		one := func(i int) []int { // where one occurrence of w can end
			if len(w.Group) > 0 {
				var ends []int
				var grp func(gg []want, j int)
				grp = func(gg []want, j int) {
					if len(gg) == 0 {
						ends = append(ends, j)
						return
					}
					if j < len(calls) && s.matchCall(gg[0], calls[j]) == "" {
						grp(gg[1:], j+1)
					}
				}
				grp(w.Group, i)
				return ends
			}
			if i < len(calls) {
				if r := s.matchCall(w, calls[i]); r == "" {
					return []int{i + 1}
				} else if i >= best {
					why = fmt.Sprintf("call %d %s %s: %s", i, calls[i].Method, calls[i].Path, r)
				}
			} else if i >= best {
				why = fmt.Sprintf("calls ended, want %s %s", w.Method, s.fill(w.Path))
			}
			return nil
		}
		if w.Optional && !w.Repeat && rec(rest, i) {
			return true
		}
		if w.Repeat {
			// Longest run first, then shorter ones.
			var ends []int
			frontier := []int{i}
			for len(frontier) > 0 {
				var next []int
				for _, f := range frontier {
					for _, e := range one(f) {
						if e > f {
							ends = append(ends, e)
							next = append(next, e)
						}
					}
				}
				frontier = next
			}
			for k := len(ends) - 1; k >= 0; k-- {
				if rec(rest, ends[k]) {
					return true
				}
			}
			return w.Optional && rec(rest, i)
		}
		for _, e := range one(i) {
			if rec(rest, e) {
				return true
			}
		}
		return false
	}
	ok := rec(golden, 0)
	return ok, why
}
