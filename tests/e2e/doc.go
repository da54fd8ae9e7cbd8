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
// The scenarios of issue 7, each driven by the baremetal CLI and asserted on
// the VM's console, the node's API fields and the workflow history:
//
//	A   IPMI (ipmi_sim) + PXE + direct deploy, SeaBIOS    scenario_a_test.go
//	B,C Redfish (ironflow vbmc) + virtual media + UEFI,   scenario_bc_test.go
//	    then undeploy with cleaning (partition table gone)
//	D-G on api, worker and pxe as separate processes:     scenario_defg_test.go
//	    two VMs at once (G), wrong checksum and retry (D),
//	    worker SIGKILLed mid-write (E), machine lost mid-write (F)
//	rescue and unrescue, IPMI + PXE (SeaBIOS) and        scenario_rescue_test.go
//	    Redfish + virtual media (OVMF): the rescue agent
//	    sets the rescue user, the disk is untouched and
//	    boots again
//
// Images the scenarios must watch being downloaded come from the test's
// own server in the lab (imageserver_test.go), which counts requests and
// can hold a download half way so a crash lands mid-write.
//
// It must never send traffic outside the namespaces it creates (or
// loopback), and everything it starts is torn down when its test ends.
package e2e
