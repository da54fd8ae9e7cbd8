package bmc

import (
	"testing"

	"github.com/ironflow/ironflow/hardware"
)

// TestEveryHardwareTypeHasItsBMCDriver checks the registry's power and
// management interfaces against the code that serves them: each hardware
// type has a BMC driver here (and each driver a hardware type), the driver
// builds from the type's required keys alone, a type that advertises
// out-of-band inspection has a driver that implements Inspector, and one
// that supports secure boot (and does not record it as asked) a driver that
// implements SecureBooter.
func TestEveryHardwareTypeHasItsBMCDriver(t *testing.T) {
	for name := range factories {
		if _, ok := hardware.Lookup(name); !ok {
			t.Errorf("BMC driver %s has no hardware type", name)
		}
	}
	for _, name := range hardware.Names() {
		ht, _ := hardware.Lookup(name)
		if _, ok := factories[name]; !ok {
			t.Errorf("hardware type %s has no BMC driver", name)
			continue
		}
		info := map[string]any{}
		for _, k := range ht.Required() {
			info[k] = "127.0.0.1"
		}
		d, err := New(name, info)
		if err != nil {
			t.Errorf("New(%s, %v): %v", name, info, err)
			continue
		}
		if _, ok := d.(Inspector); ok != ht.Has(hardware.CapOutOfBandInspection) {
			t.Errorf("%s: driver implements Inspector %v, registry says out-of-band inspection %v", name, ok, !ok)
		}
		// A type that records the boot mode as asked needs no driver for it.
		if _, ok := d.(SecureBooter); !ht.RecordsBootModeAsAsked() && ok != ht.SupportsSecureBoot() {
			t.Errorf("%s: driver implements SecureBooter %v, registry says secure boot %v", name, ok, !ok)
		}
		d.Close()
		if len(ht.Required()) > 0 {
			if _, err := New(name, map[string]any{}); err == nil {
				t.Errorf("New(%s) without %v succeeded", name, ht.Required())
			}
		}
	}
}
