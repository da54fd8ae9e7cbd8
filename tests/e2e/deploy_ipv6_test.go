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

// TestDeployIPv6OnlyPXEAndHTTPBoot deploys an OVMF VM on a segment without IPv4:
// ironflow's router advertisement sends OVMF's PXEv6 client to DHCPv6,
// which gives it its reserved address and tftp://[fd77::1]/ipxe.efi; iPXE
// asks DHCPv6 again and gets the node's script at http://[fd77::1]:8080;
// the agent boots, gets its address by DHCPv6,
// looks up and heartbeats to http://[fd77::1]:6385 (its callback URL a
// bracketed IPv6 one), streams the image from the boot service over IPv6,
// writes a config drive whose network_data is IPv6; the VM then boots its
// disk and its init prints the config drive's IPv6 address.
//
// Beside it, in the same namespace and on the same stack, a second VM
// boots over UEFI HTTP boot on IPv6 (boot interface http-ipxe, its
// firmware's PXE off): DHCPv6 answers its HTTPClient Solicit with the URL
// http://[fd77::1]:8080/loaders/snponly.efi and the "HTTPClient" vendor
// class, the firmware fetches iPXE over HTTP, and the rest is as above.
// A third boots the agent from virtual media (redfish-virtual-media), its
// ISO carrying the node's network_data: a static IPv6 address the agent
// sets before it looks up, calling back from it over IPv6.
func TestDeployIPv6OnlyPXEAndHTTPBoot(t *testing.T) {
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
	httpVM := lab.AddVM("node-6h", "52:54:00:e2:06:02", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-6h", "disk.raw"))
	httpDef := agentVM(httpVM)
	httpDef.HTTPBoot = true // no iPXE option ROM, OVMF's PXE (v4 and v6) off
	// A third boots the agent from virtual media and configures it from
	// the node's network_data (a static IPv6 address, no DHCP).
	vmediaVM := lab.AddVM("node-6v", "52:54:00:e2:06:03", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-6v", "disk.raw"))
	bmc := startRedfishBMC(t, s, def, httpDef, agentVM(vmediaVM))
	begin := time.Now()
	enroll := func(v *LabVM, bootInterface string, extra ...string) string {
		t.Helper()
		uuid := createRedfishNode(t, s, bmc, v.Name, v.Firmware, v.MAC, append([]string{"--deploy-interface", "direct", "--boot-interface", bootInterface,
			"--no-automated-clean"}, extra...)...)
		s.availableWithTestImage(t, uuid, sum)
		return uuid
	}
	const vmediaAgentAddr = "fd77::52"
	nd, err := json.Marshal(map[string]any{
		"links": []any{map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": vmediaVM.MAC}},
		"networks": []any{map[string]any{"id": "prov-v6", "type": "ipv6", "link": "nic0", "network_id": "provisioning",
			"ip_address": vmediaAgentAddr, "netmask": "ffff:ffff:ffff:ffff::"}},
		"services": []any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	uuid, httpUUID := enroll(vm, "ipxe"), enroll(httpVM, "http-ipxe")
	vmediaUUID := enroll(vmediaVM, "redfish-virtual-media", "--network-data", string(nd))
	defer printNodeHistory(t, s, uuid)
	defer printNodeHistory(t, s, httpUUID)
	defer printNodeHistory(t, s, vmediaUUID)

	const host, pubKey, addr = "e2e-6", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Eipv6 e2e", "fd77::150"
	const httpHost, httpPubKey, httpAddr = "e2e-6h", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Eipv6http e2e", "fd77::151"
	const vmediaHost, vmediaPubKey, vmediaAddr = "e2e-6v", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Eipv6vmedia e2e", "fd77::152"
	configDrive := func(v *LabVM, host, pubKey, addr string) string {
		cd, err := json.Marshal(map[string]any{
			"meta_data": map[string]any{"hostname": host, "public_keys": map[string]string{"0": pubKey}},
			"network_data": map[string]any{
				"links": []any{map[string]any{"id": "port0", "type": "phy", "ethernet_mac_address": v.MAC}},
				"networks": []any{map[string]any{"id": "net0", "type": "ipv6", "link": "port0", "ip_address": addr,
					"netmask": "ffff:ffff:ffff:ffff::", "routes": []any{}}},
				"services": []any{},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(cd)
	}
	defer printTimeline(t, s, uuid, "IPv6-only deploy")
	defer printTimeline(t, s, httpUUID, "IPv6-only deploy over UEFI HTTP boot")
	defer printTimeline(t, s, vmediaUUID, "IPv6-only deploy through virtual media")
	// All at once: the HTTP boot and virtual media ones started, the PXE
	// one waited for.
	s.mustCLI(t, "node", "deploy", httpUUID, "--config-drive", configDrive(httpVM, httpHost, httpPubKey, httpAddr))
	s.mustCLI(t, "node", "deploy", vmediaUUID, "--config-drive", configDrive(vmediaVM, vmediaHost, vmediaPubKey, vmediaAddr))
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", configDrive(vm, host, pubKey, addr), "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	t.Logf("IPv6-only deploy reached active %.1fs after node create", time.Since(begin).Seconds())
	waitProvisionState(t, s, httpUUID, "active", deployWait, httpVM.SerialLog)
	t.Logf("IPv6-only deploy over UEFI HTTP boot reached active %.1fs after node create", time.Since(begin).Seconds())
	waitProvisionState(t, s, vmediaUUID, "active", deployWait, vmediaVM.SerialLog)
	t.Logf("IPv6-only deploy through virtual media reached active %.1fs after node create", time.Since(begin).Seconds())
	for _, c := range []struct {
		vm         *LabVM
		host, key  string
		addr, uuid string
	}{{vm, host, pubKey, addr, uuid}, {httpVM, httpHost, httpPubKey, httpAddr, httpUUID}, {vmediaVM, vmediaHost, vmediaPubKey, vmediaAddr, vmediaUUID}} {
		waitBootedFromDisk(t, c.vm, c.host, c.key)
		// The init prints the config drive's network_data right after the
		// host name line.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := WaitSerial(ctx, c.vm.SerialLog, "IRONFLOW-E2E network-data type=ipv6 ip_address="+c.addr, nil); err != nil {
			t.Errorf("%s did not read its IPv6 network_data from the config drive: %v\nconsole:\n%s", c.vm.Name, err, embedded.Tail(c.vm.SerialLog, 3000))
		}
		cancel()
		// The agent's callback URL (cleared once the deploy ends) is in
		// the node's history: its DHCPv6 address, bracketed.
		hist := s.mustCLI(t, "node", "history", "list", c.uuid, "-f", "value", "-c", "Description of the event")
		if !strings.Contains(hist, "Agent called back from http://[fd77::") {
			t.Errorf("%s's agent did not call back from an address of %s:\n%s", c.vm.Name, LabPrefix6, hist)
		}
	}
	// The HTTP boot VM: its firmware asked DHCPv6 as an HTTP client, got
	// the loader's URL and fetched it over HTTP on IPv6; it never tried PXE.
	wantHTTPBooted(t, s.procs[0].Log, httpVM, httpUUID, "IPv6")
	if !logHasLine(s.procs[0].Log, "boot file offered", "http_boot=true", "family=ipv6", "http://[fd77::", httpVM.MAC) {
		t.Errorf("DHCPv6 offered the HTTP boot VM no loader URL")
	}
	// The virtual media agent took no address from DHCPv6: it called
	// back from the static one of its network_data.
	hist := s.mustCLI(t, "node", "history", "list", vmediaUUID, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "Agent called back from http://["+vmediaAgentAddr+"]") {
		t.Errorf("the virtual media agent did not call back from its network_data address %s:\n%s", vmediaAgentAddr, hist)
	}
	for _, id := range []string{uuid, httpUUID, vmediaUUID} {
		if f := s.nodeFields(t, id); f["provision_state"] != "active" {
			t.Errorf("node %s is %v, want active", id, f["provision_state"])
		}
	}
	if !logHasLine(s.procs[0].Log, "TFTP transfer done", "file=ipxe.efi") {
		t.Errorf("OVMF's PXEv6 client did not fetch ipxe.efi over TFTP")
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
