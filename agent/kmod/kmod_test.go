package kmod

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestIndexMatchAndClosure(t *testing.T) {
	ix := &Index{Modules: map[string]*Module{
		"virtio_net":   {Depends: []string{"net_failover", "virtio"}, Aliases: []string{"virtio:d00000001v*"}},
		"net_failover": {Depends: []string{"failover"}},
		"failover":     {},
		"virtio":       {},
		"virtio_pci":   {Depends: []string{"virtio"}, Aliases: []string{"pci:v00001AF4d*sv*sd*bc*sc*i*"}},
		"e1000":        {Aliases: []string{"pci:v00008086d0000100Esv*sd*bc*sc*i*"}},
		"virtio_rng":   {Depends: []string{"virtio"}, Aliases: []string{"virtio:d00000004v*"}},
	}}
	if got := ix.Match("pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"); !reflect.DeepEqual(got, []string{"virtio_pci"}) {
		t.Fatalf("pci match %v", got)
	}
	if got := ix.Match("virtio:d00000001v00001AF4"); !reflect.DeepEqual(got, []string{"virtio_net"}) {
		t.Fatalf("virtio match %v", got)
	}
	if got := ix.Match("pci:v00008086d00001234sv0sd0bc02sc00i00"); len(got) != 0 {
		t.Fatalf("unexpected match %v", got)
	}
	order, err := ix.Closure("virtio-net")
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	if len(order) != 4 || pos["failover"] > pos["net_failover"] || pos["virtio"] > pos["virtio_net"] || order[3] != "virtio_net" {
		t.Fatalf("closure order %v", order)
	}
	if _, err := ix.Closure("nope"); err == nil {
		t.Fatal("unknown module accepted")
	}
}

// TestModInfoOnDebianKernel reads real modules when the kernel was fetched
// (scripts/fetch-kernel.sh).
func TestModInfoOnDebianKernel(t *testing.T) {
	root := filepath.Join("..", "..", ".data", "kernel")
	v, err := os.ReadFile(filepath.Join(root, "version"))
	if err != nil {
		t.Skip("no kernel in .data/kernel: run scripts/fetch-kernel.sh")
	}
	ko := filepath.Join(root, "modules", strings.TrimSpace(string(v)), "kernel", "drivers", "net", "virtio_net.ko")
	name, deps, aliases, err := ModInfo(ko)
	if err != nil {
		t.Fatal(err)
	}
	if name != "virtio_net" || !contains(deps, "net_failover") || !contains(aliases, "virtio:d00000001v*") {
		t.Fatalf("modinfo %s %v %v", name, deps, aliases)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
