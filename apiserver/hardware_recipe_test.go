package apiserver

import (
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
)

// recipeDriver is a throwaway hardware type added exactly as
// docs/contributing.md ("Add a BMC driver") says: step 1 (the registry
// declaration of hardware/<type>.go) and step 2 (the BMC driver's
// registration of bmc/<type>.go, here a stand-in driver). Nothing else is
// touched; the tests below show the API lists it, serves its properties,
// defaults and checks its interfaces and validates its driver_info.
const recipeDriver = "recipe-bmc"

const recipeInterface hardware.Interface = "recipe-bmc"

func init() {
	// Step 1: hardware/recipe.go.
	hardware.ImplementBMC(recipeInterface)
	hardware.Register(hardware.Type{
		Name: recipeDriver,
		Keys: []hardware.Key{
			{Name: "recipe_address", Description: "Address of the recipe BMC. Required.", Required: true},
			{Name: "recipe_password", Description: "Password of the recipe BMC. Optional.", Secret: true},
		},
		Interfaces: map[hardware.Kind][]hardware.Interface{
			hardware.KindBIOS: {hardware.NoBIOS}, hardware.KindBoot: {hardware.PXE, hardware.IPXE},
			hardware.KindConsole: {hardware.NoConsole}, hardware.KindDeploy: {hardware.Direct, hardware.Ramdisk},
			hardware.KindFirmware: {hardware.NoFirmware}, hardware.KindInspect: {hardware.Agent, hardware.NoInspect},
			hardware.KindManagement: {recipeInterface, hardware.Noop}, hardware.KindNetwork: {hardware.Noop},
			hardware.KindPower: {recipeInterface}, hardware.KindRAID: {hardware.NoRAID},
			hardware.KindRescue: {hardware.NoRescue}, hardware.KindStorage: {hardware.Noop},
			hardware.KindVendor: {hardware.NoVendor},
		},
		BootDevices: []string{"pxe", "disk"},
	})
	// Step 2: bmc/recipe.go (a stand-in: the fake driver behind the
	// recipe's required key).
	bmc.Register(recipeDriver, func(info map[string]any) (bmc.Driver, error) {
		if missing, err := bmc.MissingKeys(recipeDriver, info); err != nil || len(missing) > 0 {
			return nil, bmc.ErrInvalidConfig
		}
		return bmc.New("fake-hardware", info)
	})
}

func TestAHardwareTypeAddedByTheRecipeIsServed(t *testing.T) {
	e := newEnv(t)
	var listed bool
	for _, d := range e.do("GET", "/v1/drivers", "1.78", nil).json(t)["drivers"].([]any) {
		listed = listed || d.(map[string]any)["name"] == recipeDriver
	}
	if !listed {
		t.Fatalf("GET /v1/drivers does not list %s", recipeDriver)
	}
	show := e.do("GET", "/v1/drivers/"+recipeDriver, "1.78", nil).json(t)
	if show["default_power_interface"] != string(recipeInterface) || show["default_boot_interface"] != "pxe" {
		t.Errorf("driver show %v", show)
	}
	props := e.do("GET", "/v1/drivers/"+recipeDriver+"/properties", "1.78", nil).json(t)
	if props["recipe_address"] != "Address of the recipe BMC. Required." || props[hardware.KeyDeployKernel] == nil {
		t.Errorf("properties %v", props)
	}

	n := e.createNode(map[string]any{"driver": recipeDriver, "name": "recipe-node"})
	if n["power_interface"] != string(recipeInterface) || n["deploy_interface"] != "direct" || n["raid_interface"] != "no-raid" {
		t.Errorf("node interfaces %v", n)
	}
	r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": recipeDriver, "deploy_interface": "anaconda"})
	if r.status != http.StatusBadRequest {
		t.Errorf("unsupported deploy interface accepted: %d %s", r.status, r.body)
	}
	v := e.do("GET", "/v1/nodes/recipe-node/validate", "1.78", nil).json(t)
	if p := v["power"].(map[string]any); p["result"] != false || p["reason"] != "Missing the following properties in node's driver_info: ['recipe_address']." {
		t.Errorf("validate power %v", p)
	}
	e.do("PATCH", "/v1/nodes/recipe-node", "1.78", []any{map[string]any{"op": "add", "path": "/driver_info/recipe_address", "value": "10.0.0.9"}})
	v = e.do("GET", "/v1/nodes/recipe-node/validate", "1.78", nil).json(t)
	if p := v["power"].(map[string]any); p["result"] != true {
		t.Errorf("validate power with the address %v", p)
	}
	if d, err := bmc.New(recipeDriver, map[string]any{"recipe_address": "10.0.0.9"}); err != nil {
		t.Errorf("BMC driver: %v", err)
	} else {
		d.Close()
	}
}
