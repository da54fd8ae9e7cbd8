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

// TestValidateHTTPIPXEAsIPXE: the http-ipxe boot interface is accepted
// by the hardware types that offer ipxe and validates as Ironic validates
// it, the same as ipxe: deploy_kernel and deploy_ramdisk go together.
func TestValidateHTTPIPXEAsIPXE(t *testing.T) {
	e := newEnv(t)
	for _, boot := range []string{"ipxe", "http-ipxe"} {
		for _, c := range []struct {
			info   map[string]any
			result any
			reason string
		}{
			{map[string]any{"deploy_kernel": "http://k"}, false, "Some parameters were missing in node's driver_info. Missing are: ['deploy_ramdisk']"},
			{map[string]any{"deploy_kernel": "http://k", "deploy_ramdisk": "http://r"}, true, ""},
			{map[string]any{}, true, ""},
		} {
			n := e.createNode(map[string]any{"driver": "fake-hardware", "boot_interface": boot, "driver_info": c.info})
			if n["boot_interface"] != boot {
				t.Errorf("%s: node created with boot_interface %v", boot, n["boot_interface"])
			}
			got := e.do("GET", "/v1/nodes/"+n["uuid"].(string)+"/validate", "1.78", nil).json(t)["boot"].(map[string]any)
			if got["result"] != c.result || (c.reason != "" && got["reason"] != c.reason) {
				t.Errorf("%s with %v: boot %v, want result %v reason %q", boot, c.info, got, c.result, c.reason)
			}
		}
	}
	for _, name := range []string{"ipmi", "redfish", "fake-hardware"} { // the shipped types
		ht, _ := hardware.Lookup(name)
		if !ht.Supports(hardware.KindBoot, hardware.IPXE) || !ht.Supports(hardware.KindBoot, hardware.HTTPIPXE) {
			t.Errorf("%s: ipxe %v but http-ipxe %v", name, ht.Supports(hardware.KindBoot, hardware.IPXE), ht.Supports(hardware.KindBoot, hardware.HTTPIPXE))
		}
	}
}
