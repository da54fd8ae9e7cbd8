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
// A scenario that needs a deployed, booted VM follows one that leaves it
// so on the same VM and stack where it can (the rescues follow A and B):
// a VM boot under software emulation is the suite's dearest step.
//
// The scenarios, each driven by the baremetal CLI and asserted on the VM's
// console, the node's API fields and the workflow history (the letters
// prefix their log lines):
//
//	A    IPMI (ipmi_sim) + PXE + direct deploy, SeaBIOS, deploy_ipmi_pxe_bios_test.go
//	     then rescue and unrescue of the booted VM
//	B, C Redfish (ironflow vbmc) + virtual media + UEFI, deploy_redfish_virtual_media_uefi_test.go
//	     then rescue and unrescue, then an NMI (`node inject nmi`)
//	     the booted kernel reports, then undeploy with
//	     cleaning (partition table gone)
//	D-G  on api, worker and pxe as separate processes:   split_stack_deploys_and_faults_test.go
//	     two VMs at once (G), wrong checksum and retry (D),
//	     worker SIGKILLed mid-write (E), machine lost mid-write (F)
//	     deploy_interface ramdisk over IPMI + PXE         deploy_ramdisk_test.go
//	     deploy_interface anaconda (kickstart installer)  deploy_anaconda_kickstart_test.go
//	     in-band (agent) and out-of-band (Redfish)        inspect_inband_and_redfish_test.go
//	     inspection
//	     rescue and unrescue (in A and B): the rescue    rescue_test.go
//	     agent sets the rescue user, the disk is
//	     untouched and boots again
//	     a Glance image (qcow2 on Debian's glance-api)   deploy_glance_test.go
//	     through the image cache, booted from disk; a
//	     wrong os_hash_value fails the next deploy
//	     partition image in BIOS mode, IPMI + PXE         deploy_partition_image_bios_test.go
//	     (SeaBIOS): MBR layout, GRUB in the MBR boots
//	     the instance kernel from the boot partition
//	     secure boot, Redfish + virtual media (OVMF      secure_boot_test.go
//	     secboot): a signed image boots with secure
//	     boot on; an unsigned one is refused by the
//	     agent before its first boot (deploy failed)
//	     secure boot over PXE, one VM: the agent        secure_boot_pxe_test.go
//	     (in-band inspection, its call-back), then a
//	     ramdisk instance the deploy turns secure boot
//	     on for, both through shim and signed GRUB
//	     over TFTP
//
// The stack under test is devstack's (docs/contributing.md, "Tests and the
// stack harness"): `ironflow dev` in the lab (stack_test.go, startStack),
// or devstack.Stack with every part a process in the lab
// (startSplitStack). The BMC simulators and node enrollment are in
// vbmc_helpers_test.go, HTTP from inside the lab in lab_http_test.go,
// reading a VM's disk in disk_helpers_test.go, the workflow timeline in
// timeline_test.go.
//
// Images the scenarios must watch being downloaded come from the test's
// own server in the lab (imageserver_test.go), which counts requests and
// can hold a download half way so a crash lands mid-write.
//
// It must never send traffic outside the namespaces it creates (or
// loopback), and everything it starts is torn down when its test ends.
package e2e
