package apiserver

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/store"
)

func (e *env) vifs(node string) []string {
	e.t.Helper()
	r := e.do("GET", "/v1/nodes/"+node+"/vifs", maxVersion(), nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("list vifs: %d %s", r.status, r.body)
	}
	var ids []string
	for _, v := range r.json(e.t)["vifs"].([]any) {
		ids = append(ids, v.(map[string]any)["id"].(string))
	}
	return ids
}

func (e *env) portVIF(uuid string) any {
	e.t.Helper()
	r := e.do("GET", "/v1/ports/"+uuid, maxVersion(), nil)
	return r.json(e.t)["internal_info"].(map[string]any)[tenantVIFKey]
}

const (
	vif1 = "1b5b5ad8-6a6c-4bd0-9d3c-1f8c0c9f0001"
	vif2 = "1b5b5ad8-6a6c-4bd0-9d3c-1f8c0c9f0002"
	vif3 = "1b5b5ad8-6a6c-4bd0-9d3c-1f8c0c9f0003"
)

// TestVIFsOnFlat: the flat network interface records each VIF on a free
// port, PXE-enabled first, lists them, refuses a duplicate and a VIF with
// no free port left with Ironic's messages, and detaches.
func TestVIFsOnFlat(t *testing.T) {
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "name": "flat", "network_interface": "flat"})["uuid"].(string)
	noPXE := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": node, "pxe_enabled": false})["uuid"].(string)
	pxe := e.createPort(map[string]any{"address": "52:54:00:aa:00:02", "node_uuid": node})["uuid"].(string)

	if got := e.vifs(node); len(got) != 0 {
		t.Errorf("vifs before attach %v", got)
	}
	attach := func(body map[string]any) resp {
		return e.do("POST", "/v1/nodes/flat/vifs", maxVersion(), body)
	}
	if r := attach(map[string]any{"id": vif1}); r.status != http.StatusNoContent {
		t.Fatalf("attach: %d %s", r.status, r.body)
	}
	if got := e.portVIF(pxe); got != vif1 {
		t.Errorf("first VIF went to %v on the PXE port, want it there", got)
	}
	r := attach(map[string]any{"id": vif1})
	if want := fmt.Sprintf("Unable to attach VIF because VIF %s is already attached to Ironic Port %s", vif1, pxe); r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("duplicate: %d %s", r.status, r.body)
	}
	if r := attach(map[string]any{"id": vif2}); r.status != http.StatusNoContent || e.portVIF(noPXE) != vif2 {
		t.Errorf("second VIF: %d %s, on %v", r.status, r.body, e.portVIF(noPXE))
	}
	r = attach(map[string]any{"id": vif3})
	if want := fmt.Sprintf("Unable to attach VIF %s, not enough free physical ports.", vif3); r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("no free port: %d %s", r.status, r.body)
	}
	if got := e.vifs(node); len(got) != 2 || got[0] != vif2 || got[1] != vif1 {
		t.Errorf("vifs %v, want [%s %s] (ports in id order)", got, vif2, vif1)
	}
	// The view shows internal_info from 1.18.
	if r := e.do("GET", "/v1/ports/"+pxe, "1.17", nil); r.json(t)["internal_info"] != nil {
		t.Errorf("internal_info shown at 1.17: %s", r.body)
	}

	// Detach.
	if r := e.do("DELETE", "/v1/nodes/flat/vifs/"+vif1, maxVersion(), nil); r.status != http.StatusNoContent {
		t.Fatalf("detach: %d %s", r.status, r.body)
	}
	if got := e.portVIF(pxe); got != nil {
		t.Errorf("VIF still on the port after detach: %v", got)
	}
	r = e.do("DELETE", "/v1/nodes/flat/vifs/"+vif1, maxVersion(), nil)
	if want := fmt.Sprintf("Unable to detach VIF %s from node %s because it is not attached to it.", vif1, node); r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("detach of a VIF not attached: %d %s", r.status, r.body)
	}

	// Bad input and versions.
	cases := []struct {
		version string
		body    any
		status  int
		msg     string
	}{
		{maxVersion(), map[string]any{}, 400, "Schema error for vif: 'id' is a required property"},
		{maxVersion(), map[string]any{"id": "not a uuid"}, 400, "Expected a logical name or UUID but received not a uuid."},
		{maxVersion(), map[string]any{"id": vif3, "port_uuid": pxe, "portgroup_uuid": pxe}, 400, "Cannot specify both port_uuid and portgroup_uuid"},
		{maxVersion(), map[string]any{"id": vif3, "port_uuid": "00000000-0000-0000-0000-000000000000"}, 404, "Port 00000000-0000-0000-0000-000000000000 could not be found."},
		{maxVersion(), map[string]any{"id": vif3, "portgroup_uuid": "00000000-0000-0000-0000-000000000000"}, 404, "Portgroup 00000000-0000-0000-0000-000000000000 could not be found."},
		{"1.27", map[string]any{"id": vif3}, 404, "Resource could not be found."},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/nodes/flat/vifs", c.version, c.body)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("POST %v at %s: %d %s, want %d %q", c.body, c.version, r.status, r.body, c.status, c.msg)
		}
	}
	// port_uuid names the port to use (1.67).
	if r := attach(map[string]any{"id": vif3, "port_uuid": pxe}); r.status != http.StatusNoContent || e.portVIF(pxe) != vif3 {
		t.Errorf("attach to a named port: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/no-such-node/vifs", maxVersion(), nil); r.status != 404 {
		t.Errorf("vifs of an unknown node: %d", r.status)
	}
}

// TestVIFsPreferPortgroups: a port group with ports takes the VIF before
// ports; a group some of whose ports have VIFs gives way to its free ports.
func TestVIFsPreferPortgroups(t *testing.T) {
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "network_interface": "flat"})["uuid"].(string)
	e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": node})
	g := e.createPortgroup(map[string]any{"node_uuid": node, "address": "52:54:00:cc:00:01"})["uuid"].(string)
	empty := e.createPortgroup(map[string]any{"node_uuid": node})["uuid"].(string)
	e.createPort(map[string]any{"address": "52:54:00:aa:00:02", "node_uuid": node, "portgroup_uuid": g})
	if r := e.do("POST", "/v1/nodes/"+node+"/vifs", maxVersion(), map[string]any{"id": vif1}); r.status != 204 {
		t.Fatalf("attach: %d %s", r.status, r.body)
	}
	r := e.do("GET", "/v1/portgroups/"+g, maxVersion(), nil)
	if got := r.json(t)["internal_info"].(map[string]any)[tenantVIFKey]; got != vif1 {
		t.Errorf("group's VIF %v, want %s", got, vif1)
	}
	r = e.do("GET", "/v1/portgroups/"+empty, maxVersion(), nil)
	if got := r.json(t)["internal_info"].(map[string]any)[tenantVIFKey]; got != nil {
		t.Errorf("a group with no ports took a VIF: %v", got)
	}
	// portgroup_uuid naming a group with no ports: no free port.
	r = e.do("POST", "/v1/nodes/"+node+"/vifs", maxVersion(), map[string]any{"id": vif2, "portgroup_uuid": empty})
	if r.status != 400 {
		t.Errorf("attach to an empty group: %d %s", r.status, r.body)
	}
	if got := e.vifs(node); len(got) != 1 || got[0] != vif1 {
		t.Errorf("vifs %v", got)
	}
}

// TestVIFsOnNoop: the noop network interface answers attach and detach
// with 204 and lists no VIFs, as Ironic's NoopNetwork.
func TestVIFsOnNoop(t *testing.T) {
	e := newEnv(t)
	n := e.createNode(map[string]any{"driver": "fake-hardware"})
	if n["network_interface"] != "noop" {
		t.Fatalf("default network interface %v", n["network_interface"])
	}
	node := n["uuid"].(string)
	port := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": node})["uuid"].(string)
	if r := e.do("POST", "/v1/nodes/"+node+"/vifs", maxVersion(), map[string]any{"id": vif1}); r.status != 204 {
		t.Errorf("attach: %d %s", r.status, r.body)
	}
	if got := e.vifs(node); len(got) != 0 {
		t.Errorf("noop listed %v", got)
	}
	if got := e.portVIF(port); got != nil {
		t.Errorf("noop recorded %v", got)
	}
	if r := e.do("DELETE", "/v1/nodes/"+node+"/vifs/"+vif1, maxVersion(), nil); r.status != 204 {
		t.Errorf("detach: %d %s", r.status, r.body)
	}
}

// TestConcurrentVIFAttachesNeverShareAPort: 20 attaches at once to a node
// with 5 ports put 5 VIFs on 5 distinct ports and refuse the other 15.
func TestConcurrentVIFAttachesNeverShareAPort(t *testing.T) {
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "network_interface": "flat"})["uuid"].(string)
	for i := 0; i < 5; i++ {
		e.createPort(map[string]any{"address": fmt.Sprintf("52:54:00:aa:00:%02x", i), "node_uuid": node})
	}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i] = e.do("POST", "/v1/nodes/"+node+"/vifs", maxVersion(),
				map[string]any{"id": fmt.Sprintf("1b5b5ad8-6a6c-4bd0-9d3c-1f8c0c9f%04d", i)}).status
		}(i)
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[204] != 5 || count[400] != 15 {
		t.Errorf("statuses %v, want 5×204 and 15×400", count)
	}
	ports, err := e.st.ListPorts(t.Context(), store.PortFilter{NodeUUID: node})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for _, p := range ports {
		v := p.InternalInfo[tenantVIFKey]
		if v == nil || seen[v] {
			t.Errorf("port %s has VIF %v (seen before: %v)", p.UUID, v, seen[v])
		}
		seen[v] = true
	}
	if got := e.vifs(node); len(got) != 5 {
		t.Errorf("vifs %v", got)
	}
}
