package apiserver

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/hardware"
)

// TestDriverPropertiesAreTheRegistrysKeys: for every hardware type,
// GET /v1/drivers/{name}/properties shows exactly the registry's
// driver_info keys with their descriptions, and GET /v1/drivers/{name}
// its interfaces and defaults.
func TestDriverPropertiesAreTheRegistrysKeys(t *testing.T) {
	e := newEnv(t)
	for _, name := range hardware.Names() {
		ht, _ := hardware.Lookup(name)
		got := e.do("GET", "/v1/drivers/"+name+"/properties", "1.78", nil).json(t)
		var want []string
		for _, k := range ht.AllKeys() {
			want = append(want, k.Name)
			if got[k.Name] != k.Description {
				t.Errorf("%s: property %s = %v, want %q", name, k.Name, got[k.Name], k.Description)
			}
		}
		slices.Sort(want)
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
			t.Errorf("%s: properties %v, registry keys %v", name, keys, want)
		}
		show := e.do("GET", "/v1/drivers/"+name, "1.78", nil).json(t)
		for _, kind := range []hardware.Kind{hardware.KindBoot, hardware.KindDeploy, hardware.KindPower, hardware.KindRAID, hardware.KindRescue} {
			if show["default_"+string(kind)+"_interface"] != string(ht.Default(kind)) {
				t.Errorf("%s: default %s interface %v, registry %s", name, kind, show["default_"+string(kind)+"_interface"], ht.Default(kind))
			}
			var enabled []string
			for _, i := range show["enabled_"+string(kind)+"_interfaces"].([]any) {
				enabled = append(enabled, i.(string))
			}
			want := interfaceNames(ht.Supported(kind))
			slices.Sort(want)
			if !slices.Equal(enabled, want) {
				t.Errorf("%s: enabled %s interfaces %v, registry %v", name, kind, enabled, want)
			}
		}
	}
}

// TestValidateNamesTheMissingRequiredKey: for every hardware type, a node
// without one of its required driver_info keys fails power validation
// naming that key; with all of them set it passes.
func TestValidateNamesTheMissingRequiredKey(t *testing.T) {
	e := newEnv(t)
	for i, name := range hardware.Names() {
		ht, _ := hardware.Lookup(name)
		full := map[string]any{}
		for _, k := range ht.Required() {
			full[k] = "10.0.0.1"
		}
		node := "validate-" + name
		e.createNode(map[string]any{"driver": name, "name": node, "driver_info": full})
		if p := e.do("GET", "/v1/nodes/"+node+"/validate", "1.78", nil).json(t)["power"].(map[string]any); p["result"] != true {
			t.Errorf("%s with %v: power %v", name, full, p)
		}
		for j, key := range ht.Required() {
			info := maps.Clone(full)
			delete(info, key)
			node := "validate-" + name + "-" + string(rune('a'+i)) + string(rune('a'+j))
			e.createNode(map[string]any{"driver": name, "name": node, "driver_info": info})
			p := e.do("GET", "/v1/nodes/"+node+"/validate", "1.78", nil).json(t)["power"].(map[string]any)
			if reason, _ := p["reason"].(string); p["result"] != false || !strings.Contains(reason, "'"+key+"'") {
				t.Errorf("%s without %s: power %v", name, key, p)
			}
		}
	}
}

// TestSecretDriverInfoKeysAreMasked: every key the registry marks Secret
// is shown as "******" in node bodies.
func TestSecretDriverInfoKeysAreMasked(t *testing.T) {
	for _, name := range hardware.Names() {
		ht, _ := hardware.Lookup(name)
		for _, k := range ht.AllKeys() {
			if k.Secret && !isSecretKey(k.Name, scopeDriverInfo) {
				t.Errorf("%s: secret key %s is not masked", name, k.Name)
			}
		}
	}
}
