// Package e2e is ironflow's end-to-end proof on virtual machines: QEMU VMs
// play the bare-metal servers, inside a network namespace the test creates,
// and are deployed by the real ironflow binary, driven by the unmodified
// baremetal CLI.
//
// It owns the lab (network namespace, bridge, taps, QEMU processes) and the
// test disk image the scenarios deploy: a small raw disk bootable by SeaBIOS
// and OVMF whose init reports, on the serial console, that it booted from
// disk and what it read from the config drive. Scenario assertions read
// those IRONFLOW-E2E markers from the VM's serial log.
//
// It must never send traffic outside the namespaces it creates (or
// loopback), and everything it starts is torn down when its test ends.
package e2e
