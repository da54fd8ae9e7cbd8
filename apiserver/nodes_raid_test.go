package apiserver

import (
	"fmt"
	"strings"
	"testing"
)

// PUT /v1/nodes/{id}/states/raid (1.12) stores a target_raid_config that
// Ironic's raid_config_schema.json accepts and refuses the others with
// Ironic's message; a node on no-raid refuses it.
func TestSetRAIDConfig(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "raid-node"})["uuid"].(string)
	put := func(v string, body any) resp { return e.do("PUT", "/v1/nodes/"+uuid+"/states/raid", v, body) }
	good := map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "1", "size_gb": 100, "is_root_volume": true, "controller": "RAID.Integrated.1-1", "physical_disks": []any{"0", "1"}},
		map[string]any{"raid_level": "5", "size_gb": "MAX", "disk_type": "ssd"},
	}}
	if r := put("1.11", good); r.status != 406 { // Ironic's allow_raid_config

		t.Fatalf("1.11: %d %s", r.status, r.body)
	}
	if r := put("1.12", good); r.status != 204 {
		t.Fatalf("good config: %d %s", r.status, r.body)
	}
	got := e.do("GET", "/v1/nodes/"+uuid, "1.12", nil).json(t)["target_raid_config"]
	if fmt.Sprint(got) != fmt.Sprint(map[string]any{"logical_disks": []any{
		map[string]any{"controller": "RAID.Integrated.1-1", "is_root_volume": true, "physical_disks": []any{"0", "1"}, "raid_level": "1", "size_gb": float64(100)},
		map[string]any{"disk_type": "ssd", "raid_level": "5", "size_gb": "MAX"}}}) {
		t.Fatalf("target_raid_config = %v", got)
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{}, ""},
		{map[string]any{"disks": []any{}}, "RAID config validation error: Additional properties are not allowed ('disks' was unexpected)"},
		{map[string]any{"logical_disks": []any{}}, "RAID config validation error: [] is too short"},
		{map[string]any{"logical_disks": []any{map[string]any{"size_gb": 10}}}, "RAID config validation error: 'raid_level' is a required property"},
		{map[string]any{"logical_disks": []any{map[string]any{"raid_level": "7", "size_gb": 10}}}, "RAID config validation error: '7' is not one of ['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0']"},
		{map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 0}}}, "RAID config validation error: 0 is not valid under any of the given schemas"},
		{map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 10, "physical_disks": []any{"a"}}}}, "RAID config validation error: 'controller' is a dependency of 'physical_disks'"},
		{map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 10, "is_root_volume": true}, map[string]any{"raid_level": "0", "size_gb": 10, "is_root_volume": true}}},
			"Raid config cannot have more than one root volume. 2 root volumes were specified"},
	} {
		r := put("1.12", c.body)
		if c.want == "" {
			if r.status != 204 {
				t.Errorf("%v: %d %s", c.body, r.status, r.body)
			}
			continue
		}
		if r.status != 400 || r.faultstring(t) != c.want {
			t.Errorf("%v: %d %s, want 400 %q", c.body, r.status, r.body, c.want)
		}
	}
	other := e.createNode(map[string]any{"driver": "fake-hardware", "name": "no-raid-node", "raid_interface": "no-raid"})["uuid"].(string)
	if r := e.do("PUT", "/v1/nodes/"+other+"/states/raid", "1.12", good); r.status != 400 || r.faultstring(t) != "Driver fake-hardware does not support raid (disabled or not implemented)." {
		t.Fatalf("no-raid: %d %s", r.status, r.body)
	}
}

// GET /v1/drivers/{d}/raid/logical_disk_properties lists the schema's
// logical disk properties for a driver whose default RAID interface
// supports RAID.
func TestRAIDLogicalDiskProperties(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/v1/drivers/fake-hardware/raid/logical_disk_properties", "1.12", nil)
	props := r.json(t)
	if r.status != 200 || len(props) != 10 || props["size_gb"] == nil || props["raid_level"] == nil {
		t.Fatalf("fake-hardware: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/drivers/ipmi/raid/logical_disk_properties", "1.12", nil); r.status != 400 {
		t.Fatalf("ipmi (no-raid): %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/drivers/nope/raid/logical_disk_properties", "1.12", nil); r.status != 404 {
		t.Fatalf("unknown driver: %d %s", r.status, r.body)
	}
}

// raid_interface agent builds software RAID only: a logical disk for a
// RAID controller is refused with a message that says so, a software one
// is stored.
func TestSetRAIDConfigAgentIsSoftwareOnly(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "swraid-node", "raid_interface": "agent"})["uuid"].(string)
	put := func(body any) resp { return e.do("PUT", "/v1/nodes/"+uuid+"/states/raid", "1.31", body) }
	soft := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "controller": "software"}}}
	if r := put(soft); r.status != 204 {
		t.Fatalf("software RAID: %d %s", r.status, r.body)
	}
	hard := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 100, "controller": "RAID.Integrated.1-1"}}}
	want := "Software RAID configuration requires all logical disks to have 'controller'='software'. Logical disk 0 of node " + uuid +
		" has controller 'RAID.Integrated.1-1': the agent raid interface builds software RAID only; use a hardware RAID interface (redfish) for a RAID controller."
	if r := put(hard); r.status != 400 || r.faultstring(t) != want {
		t.Fatalf("hardware RAID on raid_interface agent: %d %s, want 400 %q", r.status, r.body, want)
	}
	// physical_disks as root device hints, at least two (the schema's
	// second anyOf branch); one hint or a mix is refused.
	hints := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software",
		"physical_disks": []any{map[string]any{"name": "/dev/vda"}, map[string]any{"serial": "S2"}}}}}
	if r := put(hints); r.status != 204 {
		t.Fatalf("physical_disks hints: %d %s", r.status, r.body)
	}
	for _, pd := range [][]any{{map[string]any{"name": "/dev/vda"}}, {map[string]any{"name": "/dev/vda"}, "1"}} {
		bad := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software", "physical_disks": pd}}}
		if r := put(bad); r.status != 400 || !strings.Contains(r.faultstring(t), "is not valid under any of the given schemas") {
			t.Fatalf("physical_disks %v: %d %s", pd, r.status, r.body)
		}
	}
	noController := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 100}}}
	if r := put(noController); r.status != 400 || !strings.Contains(r.faultstring(t), "has controller None") {
		t.Fatalf("no controller on raid_interface agent: %d %s", r.status, r.body)
	}
}
