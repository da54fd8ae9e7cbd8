package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func agentBoot(node string, macs ...string) *store.BootConfig {
	return &store.BootConfig{
		NodeUUID: node, MACs: macs, BootMode: store.BootModeUEFI, Method: store.BootMethodPXE, Kind: store.BootKindAgent,
		KernelURL: "http://127.0.0.1:8080/agent.kernel", InitrdURL: "http://127.0.0.1:8080/agent.initramfs",
		KernelParams: "console=ttyS0",
	}
}

func TestBootConfigByMAC(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	a := newNode(t, s, &store.Node{})
	b := newNode(t, s, &store.Node{})
	if err := s.PutBootConfig(ctx, agentBoot(a.UUID, "52:54:00:00:0A:01", "52:54:00:00:0a:02")); err != nil {
		t.Fatalf("PutBootConfig: %v", err)
	}
	if err := s.PutBootConfig(ctx, agentBoot(b.UUID, "52:54:00:00:0b:01")); err != nil {
		t.Fatalf("PutBootConfig: %v", err)
	}
	cases := []struct {
		mac  string
		want string
	}{
		{"52:54:00:00:0a:01", a.UUID},
		{"52:54:00:00:0A:02", a.UUID},
		{"52-54-00-00-0b-01", b.UUID},
		{"52:54:00:00:0c:01", ""},
	}
	for _, c := range cases {
		got, err := s.BootConfigByMAC(ctx, c.mac)
		if c.want == "" {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("BootConfigByMAC(%s) = %v, %v; want ErrNotFound", c.mac, got, err)
			}
			continue
		}
		if err != nil || got.NodeUUID != c.want {
			t.Errorf("BootConfigByMAC(%s) = %+v, %v; want node %s", c.mac, got, err, c.want)
		}
	}

	// Replacing the config replaces its MACs.
	repl := agentBoot(a.UUID, "52:54:00:00:0a:03")
	repl.Kind, repl.Method, repl.ISOPath = store.BootKindInstance, store.BootMethodVMedia, "/var/lib/ironflow/a.iso"
	if err := s.PutBootConfig(ctx, repl); err != nil {
		t.Fatalf("PutBootConfig replace: %v", err)
	}
	if _, err := s.BootConfigByMAC(ctx, "52:54:00:00:0a:01"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old MAC after replace: %v, want ErrNotFound", err)
	}
	got, err := s.GetBootConfig(ctx, a.UUID)
	if err != nil || !slices.Equal(got.MACs, []string{"52:54:00:00:0a:03"}) || got.Kind != store.BootKindInstance ||
		got.Method != store.BootMethodVMedia || got.ISOPath != "/var/lib/ironflow/a.iso" || got.UpdatedAt.IsZero() {
		t.Fatalf("GetBootConfig = %+v, %v", got, err)
	}

	if err := s.DeleteBootConfig(ctx, a.UUID); err != nil {
		t.Fatalf("DeleteBootConfig: %v", err)
	}
	if err := s.DeleteBootConfig(ctx, a.UUID); err != nil {
		t.Fatalf("second DeleteBootConfig: %v (must be idempotent)", err)
	}
	if _, err := s.GetBootConfig(ctx, a.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetBootConfig after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteNode(ctx, b.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BootConfigByMAC(ctx, "52:54:00:00:0b:01"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("boot config of a deleted node: %v, want ErrNotFound", err)
	}
}

func TestBootConfigValidation(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	cases := []struct {
		name   string
		mutate func(c *store.BootConfig)
		want   error
	}{
		{"invalid MAC", func(c *store.BootConfig) { c.MACs = []string{"52:54"} }, store.ErrInvalidInput},
		{"boot mode", func(c *store.BootConfig) { c.BootMode = "legacy" }, store.ErrInvalidInput},
		{"method", func(c *store.BootConfig) { c.Method = "http" }, store.ErrInvalidInput},
		{"kind", func(c *store.BootConfig) { c.Kind = "windows" }, store.ErrInvalidInput},
		{"missing node", func(c *store.BootConfig) { c.NodeUUID = "6a1f0c4e-0000-4000-8000-000000000000" }, store.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := agentBoot(n.UUID, "52:54:00:00:0a:01")
			c.mutate(cfg)
			if err := s.PutBootConfig(ctx, cfg); !errors.Is(err, c.want) {
				t.Fatalf("PutBootConfig: %v, want %v", err, c.want)
			}
		})
	}
	if _, err := s.BootConfigByMAC(ctx, "nonsense"); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("BootConfigByMAC(nonsense): %v, want ErrInvalidInput", err)
	}
}

// An anaconda boot config carries its kickstart; replacing the config with
// one that has none empties it, so an old kickstart (and its token) is never
// served to a later deploy.
func TestBootConfigKickstartRoundTrip(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	const ks = "text\nliveimg --url=http://127.0.0.1:8080/images/os.tar\n%pre\ncurl -d '{\"agent_token\": \"tok\"}'\n%end\n"
	c := agentBoot(n.UUID, "52:54:00:00:0d:01")
	c.Kind, c.Kickstart = store.BootKindAnaconda, ks
	if err := s.PutBootConfig(ctx, c); err != nil {
		t.Fatalf("PutBootConfig: %v", err)
	}
	for _, get := range []func() (*store.BootConfig, error){
		func() (*store.BootConfig, error) { return s.GetBootConfig(ctx, n.UUID) },
		func() (*store.BootConfig, error) { return s.BootConfigByMAC(ctx, "52:54:00:00:0d:01") },
	} {
		got, err := get()
		if err != nil || got.Kickstart != ks || got.Kind != store.BootKindAnaconda {
			t.Fatalf("read back = %+v, %v; want the kickstart", got, err)
		}
	}
	if err := s.PutBootConfig(ctx, agentBoot(n.UUID, "52:54:00:00:0d:01")); err != nil {
		t.Fatalf("PutBootConfig replace: %v", err)
	}
	got, err := s.GetBootConfig(ctx, n.UUID)
	if err != nil || got.Kickstart != "" {
		t.Fatalf("after replacing with an agent boot config: kickstart %q, %v; want empty", got.Kickstart, err)
	}
}

// The boot config carries its node's secure_boot: the PXE services send a
// node with secure boot on through the signed chain (pxe/grubnet.go).
func TestBootConfigCarriesTheNodesSecureBoot(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	on := true
	a := newNode(t, s, &store.Node{SecureBoot: &on})
	b := newNode(t, s, &store.Node{})
	for _, n := range []string{a.UUID, b.UUID} {
		mac := "52:54:00:5b:0a:01"
		if n == b.UUID {
			mac = "52:54:00:5b:0b:01"
		}
		if err := s.PutBootConfig(ctx, agentBoot(n, mac)); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.BootConfigByMAC(ctx, "52:54:00:5b:0a:01"); err != nil || !c.SecureBoot {
		t.Errorf("node with secure boot on: %+v, %v; want SecureBoot", c, err)
	}
	if c, err := s.GetBootConfig(ctx, a.UUID); err != nil || !c.SecureBoot {
		t.Errorf("GetBootConfig of the node with secure boot on: %+v, %v; want SecureBoot", c, err)
	}
	if c, err := s.BootConfigByMAC(ctx, "52:54:00:5b:0b:01"); err != nil || c.SecureBoot {
		t.Errorf("node without secure boot: %+v, %v; want no SecureBoot", c, err)
	}
}

// An http-ipxe boot config keeps its loader URL through the store, which
// the DHCP service offers to the node's UEFI HTTP boot.
func TestBootConfigHTTPBootLoaderURL(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	bc := agentBoot(n.UUID, "52:54:00:00:16:01")
	bc.Method, bc.LoaderURL = store.BootMethodHTTPIPXE, "http://127.0.0.1:8080/loaders/snponly.efi"
	if err := s.PutBootConfig(ctx, bc); err != nil {
		t.Fatalf("PutBootConfig: %v", err)
	}
	got, err := s.BootConfigByMAC(ctx, "52:54:00:00:16:01")
	if err != nil || got.Method != store.BootMethodHTTPIPXE || got.LoaderURL != bc.LoaderURL {
		t.Fatalf("BootConfigByMAC = %+v, %v; want method http-ipxe and loader %s", got, err, bc.LoaderURL)
	}
	// Replaced by a PXE config, the loader goes with it.
	if err := s.PutBootConfig(ctx, agentBoot(n.UUID, "52:54:00:00:16:01")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetBootConfig(ctx, n.UUID); err != nil || got.LoaderURL != "" {
		t.Fatalf("GetBootConfig after replace = %+v, %v; want no loader URL", got, err)
	}
}
