package console

import (
	"fmt"
	"strconv"

	"github.com/ironflow/ironflow/hardware"
)

// SpecFor is what the node's console interface needs on the worker, read
// from its driver_info (the ipmi keys of hardware/ipmi.go, Ironic's
// ipmi_terminal_port, the VNC address of redfish-graphical). An interface
// without a console is an error.
func SpecFor(iface, node string, info map[string]any) (Spec, error) {
	spec := Spec{Node: node}
	switch hardware.ConsoleOf(hardware.Interface(iface)).Method() {
	case hardware.ConsoleFake:
		spec.Serial = FakeSource{Node: node}
	case hardware.ConsoleIPMISOL:
		sol := IPMISOL{}
		var ok bool
		if sol.Address, ok = hardware.Text(info, "ipmi_address"); !ok || sol.Address == "" {
			return spec, fmt.Errorf("node %s: driver_info ipmi_address is needed for the console", node)
		}
		sol.Username, _ = hardware.Text(info, "ipmi_username")
		sol.Password, _ = hardware.Text(info, "ipmi_password")
		// Cipher suite 3 unless the node says otherwise, as ironflow's
		// IPMI driver (hardware/ipmi.go): ipmitool's own default (17,
		// after asking the BMC's suites) fails on BMCs that do not list them.
		if sol.CipherSuite, _ = hardware.Text(info, "ipmi_cipher_suite"); sol.CipherSuite == "" {
			sol.CipherSuite = "3"
		}
		sol.PrivLevel, _ = hardware.Text(info, "ipmi_priv_level")
		var err error
		if sol.Port, err = port(info, "ipmi_port"); err != nil {
			return spec, fmt.Errorf("node %s: %w", node, err)
		}
		if spec.SerialPort, err = port(info, hardware.KeyTerminalPort); err != nil {
			return spec, fmt.Errorf("node %s: %w", node, err)
		}
		spec.Serial = sol
	case hardware.ConsoleVNC:
		// driver_info console_vnc_address wins; without it the BMC is
		// asked at each session where its VNC server listens (Ironic's
		// redfish-graphical reads the BMC too; ironflow vbmc announces it
		// in its Manager: docs/console.md).
		if addr, _ := hardware.Text(info, hardware.KeyConsoleVNCAddress); addr != "" {
			spec.Graphical = TCPSource{Address: addr}
			break
		}
		if a, _ := hardware.Text(info, "redfish_address"); a == "" {
			return spec, fmt.Errorf("node %s: driver_info %s (or redfish_address, to ask the BMC) is needed for the graphical console", node, hardware.KeyConsoleVNCAddress)
		}
		spec.Graphical = BMCVNCSource{Driver: "redfish", Info: info}
	default:
		return spec, fmt.Errorf("node %s: console interface %q has no console", node, iface)
	}
	return spec, nil
}

// port reads a TCP port of driver_info; 0 when unset.
func port(info map[string]any, key string) (int, error) {
	s, ok := hardware.Text(info, key)
	if !ok || s == "" {
		return 0, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("driver_info %s %q is not a port", key, s)
	}
	return p, nil
}
