package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// startIPv6Stack is startStack on an IPv6-only lab (NewIPv6Lab): the API,
// the boot service and TFTP on [LabAddress6], DHCPv6 with a pool of
// LabPrefix6 and ironflow's router advertisements on the bridge, no DHCPv4.
func startIPv6Stack(t *testing.T, lab *Lab) *stack {
	t.Helper()
	s := newStack(t, lab)
	s.api, s.boot = net.JoinHostPort(LabAddress6, "6385"), net.JoinHostPort(LabAddress6, "8080")
	args := []string{s.bin, "dev",
		"--data-dir", s.dataDir,
		"--listen", s.api,
		"--agent-api-url", "http://" + s.api,
		"--boot-url", "http://" + s.boot,
		"--boot-listen", s.boot,
		"--tftp-listen", net.JoinHostPort(LabAddress6, "69"),
		"--dhcpv6-interface", lab.Bridge,
		"--dhcpv6-server-address", LabAddress6,
		"--dhcpv6-pool", LabPrefix6 + "," + LabPoolFirst6 + "," + LabPoolLast6,
		"--router-advertisements",
		"--images-dir", s.imagesDir,
		"--temporal-port", temporalPort,
		"--temporal-ui-port", "-1",
		"--agent-insecure",
	}
	dev := lab.Start("ironflow-dev", []string{"IRONFLOW_TEMPORAL_BIN=" + temporalCLI()}, args...)
	s.procs = append(s.procs, dev)
	s.waitHTTP(t, "http://"+s.api+"/v1", dev)
	t.Logf("stack: ironflow dev up on IPv6 only: API http://%s, boot http://%s", s.api, s.boot)
	return s
}

// TestDeployIPv6OnlyUEFIPXE deploys an OVMF VM on a segment without IPv4:
// ironflow's router advertisement sends OVMF's PXEv6 client to DHCPv6,
// which gives it its reserved address and tftp://[fd77::1]/ipxe.efi; iPXE
// asks DHCPv6 again and gets the node's script at http://[fd77::1]:8080;
// the agent boots, gets its address by DHCPv6,
// looks up and heartbeats to http://[fd77::1]:6385 (its callback URL a
// bracketed IPv6 one), streams the image from the boot service over IPv6,
// writes a config drive whose network_data is IPv6; the VM then boots its
// disk and its init prints the config drive's IPv6 address.
func TestDeployIPv6OnlyUEFIPXE(t *testing.T) {
	RequireQEMU(t)
	lab := NewIPv6Lab(t)
	s := startIPv6Stack(t, lab)
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-6", "52:54:00:e2:06:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-6", "disk.raw"))
	// No iPXE option ROM and no IPv4 PXE: OVMF's own PXEv6 client boots
	// (edk2 OvmfPkg's RUNTIME_CONFIG, opt/org.tianocore/IPv4PXESupport),
	// fetches ipxe.efi over TFTP on IPv6, and iPXE asks DHCPv6 again.
	def := agentVM(vm)
	def.QEMUExtra = []string{"-global", "virtio-net-pci.romfile=", "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n"}
	bmc := startRedfishBMC(t, s, def)
	begin := time.Now()
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC, "--deploy-interface", "direct", "--boot-interface", "ipxe",
		"--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)

	const host, pubKey, addr = "e2e-6", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Eipv6 e2e", "fd77::150"
	cd, err := json.Marshal(map[string]any{
		"meta_data": map[string]any{"hostname": host, "public_keys": map[string]string{"0": pubKey}},
		"network_data": map[string]any{
			"links": []any{map[string]any{"id": "port0", "type": "phy", "ethernet_mac_address": vm.MAC}},
			"networks": []any{map[string]any{"id": "net0", "type": "ipv6", "link": "port0", "ip_address": addr,
				"netmask": "ffff:ffff:ffff:ffff::", "routes": []any{}}},
			"services": []any{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer printTimeline(t, s, uuid, "IPv6-only deploy")
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", string(cd), "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	t.Logf("IPv6-only deploy reached active %.1fs after node create", time.Since(begin).Seconds())
	waitBootedFromDisk(t, vm, host, pubKey)
	// The init prints the config drive's network_data right after the
	// host name line.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E network-data type=ipv6 ip_address="+addr, nil); err != nil {
		t.Errorf("the deployed VM did not read its IPv6 network_data from the config drive: %v\nconsole:\n%s", err, embedded.Tail(vm.SerialLog, 3000))
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" {
		t.Errorf("node is %v, want active", f["provision_state"])
	}
	if !logHasLine(s.procs[0].Log, "TFTP transfer done", "file=ipxe.efi") {
		t.Errorf("OVMF's PXEv6 client did not fetch ipxe.efi over TFTP")
	}
	// The agent's callback URL (cleared once the deploy ends) is in the
	// node's history: its DHCPv6 address, bracketed.
	hist := s.mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "Agent called back from http://[fd77::") {
		t.Errorf("the agent did not call back from an address of %s:\n%s", LabPrefix6, hist)
	}
}

// logHasLine reports whether one line of the log file holds every part.
func logHasLine(path string, parts ...string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
