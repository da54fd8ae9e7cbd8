package vbmc

import (
	"fmt"
	"net/netip"
	"strconv"
)

// The BMC side of the consoles (docs/console.md, "Browser and graphical
// console"): a VM with vnc_address has a VGA display served by QEMU's own VNC
// server, a VM with serial_address has its serial port on a TCP listener.
// QEMU owns both listeners, so they live exactly as long as the VM runs,
// whether the Redfish service or ipmi_sim's chassis_control started it.

// vncBasePort is RFB's display 0 (RFC 6143 section 1): QEMU's -vnc takes a
// display number, port 5900+N.
const vncBasePort = 5900

// checkConsoleAddresses validates a VM's console addresses: IP literals with
// a port, the VNC one at or above 5900, none used twice in the file.
func checkConsoleAddresses(vm *VM, seen map[netip.AddrPort]string) error {
	for _, f := range []struct {
		key  string
		addr string
	}{{"vnc_address", vm.VNCAddress}, {"serial_address", vm.SerialAddress}} {
		if f.addr == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(f.addr)
		if err != nil || ap.Port() == 0 {
			return fmt.Errorf("vm %s: %s %q is not IP:port", vm.Name, f.key, f.addr)
		}
		if f.key == "vnc_address" && ap.Port() < vncBasePort {
			return fmt.Errorf("vm %s: vnc_address port %d is below %d (QEMU serves VNC displays from port %d up)", vm.Name, ap.Port(), vncBasePort, vncBasePort)
		}
		if other, dup := seen[ap]; dup {
			return fmt.Errorf("vm %s: %s %s is also %s", vm.Name, f.key, f.addr, other)
		}
		seen[ap] = "vm " + vm.Name + "'s " + f.key
	}
	return nil
}

// serialChardev is QEMU's chardev s0 for the serial port: the console log
// file, or with serial_address a TCP server (one client at a time, output
// dropped while none is connected) that still writes everything to the
// console log (QEMU's chardev logfile option).
func (m *Machine) serialChardev() string {
	if m.vm.SerialAddress == "" {
		return "file,id=s0,path=" + m.vm.SerialLog + ",append=on"
	}
	ap := netip.MustParseAddrPort(m.vm.SerialAddress) // checked by normalize
	return "socket,id=s0,host=" + ap.Addr().String() + ",port=" + strconv.Itoa(int(ap.Port())) +
		",server=on,wait=off,nodelay=on,logfile=" + m.vm.SerialLog + ",logappend=on"
}

// vncArgs gives the VM a standard VGA adapter and QEMU's VNC server on
// vnc_address; without it the VM has no display (-nodefaults), as before.
func (m *Machine) vncArgs() []string {
	if m.vm.VNCAddress == "" {
		return nil
	}
	ap := netip.MustParseAddrPort(m.vm.VNCAddress)
	host := ap.Addr().String()
	if ap.Addr().Is6() {
		host = "[" + host + "]"
	}
	return []string{
		"-device", "VGA,id=vga0",
		"-vnc", host + ":" + strconv.Itoa(int(ap.Port())-vncBasePort),
	}
}

// consoleProperties are the Manager's GraphicalConsole and SerialConsole
// (Redfish Manager schema, v1_10_0) and, since Redfish has no property for
// where a KVM-IP or raw serial service listens, an Oem.Ironflow block with
// the addresses.
func (m *Machine) consoleProperties() map[string]any {
	graphical := map[string]any{"ServiceEnabled": false, "MaxConcurrentSessions": 0, "ConnectTypesSupported": []string{}}
	serial := map[string]any{"ServiceEnabled": false, "MaxConcurrentSessions": 0, "ConnectTypesSupported": []string{}}
	oem := map[string]any{}
	if m.vm.VNCAddress != "" {
		graphical = map[string]any{"ServiceEnabled": true, "MaxConcurrentSessions": 4, "ConnectTypesSupported": []string{"KVMIP"}}
		oem["VNCAddress"] = m.vm.VNCAddress
	}
	if m.vm.SerialAddress != "" {
		serial = map[string]any{"ServiceEnabled": true, "MaxConcurrentSessions": 1, "ConnectTypesSupported": []string{"Oem"}}
		oem["SerialAddress"] = m.vm.SerialAddress
	}
	p := map[string]any{"GraphicalConsole": graphical, "SerialConsole": serial}
	if len(oem) > 0 {
		p["Oem"] = map[string]any{"Ironflow": oem}
	}
	return p
}
