package activities

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

// TestSecureBootRequestedReadsTheCapability: instance_info.capabilities
// (object or its JSON text) first, else properties.capabilities.
func TestSecureBootRequestedReadsTheCapability(t *testing.T) {
	for _, c := range []struct {
		name string
		ii   map[string]any
		prop map[string]any
		want bool
	}{
		{"nothing", nil, nil, false},
		{"instance object", map[string]any{"capabilities": map[string]any{"secure_boot": "true"}}, nil, true},
		{"instance text", map[string]any{"capabilities": `{"secure_boot": "True"}`}, nil, true},
		{"instance false wins", map[string]any{"capabilities": map[string]any{"secure_boot": "false"}},
			map[string]any{"capabilities": "secure_boot:true"}, false},
		{"properties", nil, map[string]any{"capabilities": "boot_mode:uefi, secure_boot:true"}, true},
		{"properties false", nil, map[string]any{"capabilities": "secure_boot:false"}, false},
	} {
		n := &store.Node{InstanceInfo: c.ii, Properties: c.prop}
		if got := secureBootRequested(n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

type plainDriver struct{ bmc.Driver }

type secureBootDriver struct{ bmc.Driver }

func (secureBootDriver) SecureBoot(context.Context) (bool, error)  { return false, nil }
func (secureBootDriver) SetSecureBoot(context.Context, bool) error { return nil }

// TestTheAgentChecksTheLoaderOnlyWhereSecureBootCanBeOn: the loader check
// is asked for when the instance requests secure boot and the node's BMC
// can turn it on; a driver without secure boot only warns at deploy, so
// its unsigned loader is not refused.
func TestTheAgentChecksTheLoaderOnlyWhereSecureBootCanBeOn(t *testing.T) {
	st := storetest.New(t)
	a := New(st, Config{Conductor: "c"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	caps := map[string]any{"capabilities": map[string]any{"secure_boot": "true"}}
	for _, c := range []struct {
		name     string
		ii       map[string]any
		withSB   bool
		wantAsks bool
	}{
		{"redfish, secure boot asked", caps, true, true},
		{"no secure boot support, asked", caps, false, false},
		{"redfish, not asked", nil, true, false},
	} {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: "deploying", InstanceInfo: c.ii}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		withSB := c.withSB
		a.NewBMC = func(driver string, info map[string]any) (bmc.Driver, error) {
			d, err := bmc.New(driver, info)
			if withSB {
				return secureBootDriver{d}, err
			}
			return plainDriver{d}, err
		}
		if got := a.checkSignedLoader(ctx, n); got != c.wantAsks {
			t.Errorf("%s: check %v, want %v", c.name, got, c.wantAsks)
		}
	}
}
