// Package vbmc is ironflow's virtual BMC: it makes QEMU virtual machines look
// like bare-metal servers to ironflow's BMC drivers, through a Redfish service
// (`ironflow vbmc serve`) and through OpenIPMI's ipmi_sim with a
// chassis_control program (`ironflow vbmc ipmi-sim`, `ironflow vbmc
// chassis-control`).
//
// One VM definition serves both paths: power, boot order and virtual media are
// applied by the same code (machine.go), QEMU is always started fully detached
// (`-daemonize`, its own session, stdio on /dev/null) so that a short-lived
// chassis_control process can start it, and the VM's state lives in files under
// state_dir/NAME, guarded by a file lock, so that the Redfish service and
// chassis_control may act on the same VM.
//
// For out-of-band inspection the Redfish system also links Processors (one
// CPU with TotalThreads = cpus), Memory (one DIMM of memory_mb),
// EthernetInterfaces (the NIC's MAC) and SimpleStorage (the disk with the size
// the guest sees, from qemu-img info), all answered from the configuration and
// the disk file without starting QEMU.
//
// The system and its chassis show a writable IndicatorLED and each drive a
// writable LocationIndicatorActive (indicators.go), kept in state_dir/NAME;
// a ComputerSystem.Reset with ResetType Nmi is QEMU's inject-nmi.
//
// The system's Status.Health (the node's health to ironflow's power sync)
// is OK until the OEM action Ironflow.SetHealth sets it (health.go):
// POST /redfish/v1/Systems/NAME/Actions/Oem/Ironflow.SetHealth with
// {"Health": "OK" | "Warning" | "Critical" | null}, kept in state_dir/NAME.
// The chassis links Thermal (CPU and inlet temperatures, two fans) and Power
// (consumption, one power supply) whose readings follow the VM's power
// state; a system set to Warning or Critical has a failing first fan
// (sensors.go). ipmi_sim's BMC has SDRs and fixed readings for two
// temperatures and two fans (ipmi_sensors.go).
//
// It owns QEMU processes and their state directories. It never reaches the
// network beyond 127.0.0.1 or the lab networks named in the configuration
// (virtual media downloads), and it never logs the BMC password or session
// tokens.
//
// # Configuration
//
// The configuration is a JSON file:
//
//	{
//	  "state_dir": "/var/lib/ironflow-vbmc",  // required; per-VM directories go below
//	  "username": "admin",                     // BMC credentials (Redfish and IPMI)
//	  "password": "password",
//	  "media_networks": ["192.168.100.0/24"],  // where InsertMedia may download from
//	                                           // besides loopback (optional)
//	  "qemu_binary": "qemu-system-x86_64",     // optional
//	  "qemu_binary_aarch64": "qemu-system-aarch64", // optional: runs the aarch64 VMs
//	  "accel": "auto",                         // auto (KVM if /dev/kvm opens, else TCG), kvm, tcg
//	  "update_seconds": 3,                     // how long a SimpleUpdate task runs (update.go)
//	  "bmc_reset_seconds": 0,                  // 503 for this long after a BMC update
//	  "vms": [{
//	    "name": "vm0",                         // Redfish System/Manager id
//	    "mac": "52:54:00:00:00:10",            // NIC MAC (virtio-net-pci)
//	    "disk": "/path/vm0.qcow2",             // raw unless it ends in .qcow2; optional
//	    "disk_size": "1G",                     // create the disk with qemu-img if missing
//	    "memory_mb": 512,                      // default 512
//	    "cpus": 1,                             // default 1
//	    "firmware": "bios",                    // "bios" (SeaBIOS) or "uefi" (OVMF)
//	    "arch": "x86_64",                      // or "aarch64": virt machine, AAVMF, uefi only (machine_aarch64.go)
//	    "http_boot": false,                    // uefi only: network boot is OVMF's UEFI HTTP boot alone (no iPXE ROM, no PXE)
//	    "https_cacerts": "/path/boot-ca.pem",  // uefi only: CAs OVMF trusts for HTTPS boot (fw_cfg etc/edk2/https/cacerts)
//	    "netdev": "tap:tap0",                  // "tap:IFNAME", "user" or "none"
//	    "serial_log": "/path/console.log",     // default state_dir/NAME/console.log
//	    "serial_address": "127.0.0.1:9003",        // also serve the serial line here; ipmi_sim's SOL connects to it
//	    "qemu_extra": ["-cpu", "max"],         // appended to the QEMU command line
//	    "vnc_address": "127.0.0.1:5901",       // VGA + QEMU's VNC server (console.go); optional
//	    "serial_address": "127.0.0.1:7001",    // serial port on TCP too (console.go); optional
//	    "drives": ["/path/vm0-d1.raw"]         // more Storage drives for RAID volumes (storage.go)
//	  }]
//	}
//
// Some nested-KVM hosts cannot run OVMF from pflash (QEMU logs "KVM internal
// error" and query-status says internal-error): use "accel": "tcg" there.
//
// # Consoles
//
// A VM with vnc_address has a VGA display that QEMU's VNC server shows on
// that address; one with serial_address has its serial port on a TCP
// listener there as well as in the console log. The Manager announces them
// (GraphicalConsole, SerialConsole, Oem.Ironflow.VNCAddress and
// SerialAddress); an ironflow worker reaches them through the node's
// driver_info (docs/console.md).
//
// # Boot order
//
// The machine has three boot devices: the disk (virtio-blk), the NIC
// (virtio-net-pci, iPXE ROM) and a CD drive (ide-cd, empty until media is
// inserted). Without an override the order is disk, NIC, CD — an empty disk
// falls through to the network, as a fresh server does. An override puts its
// device first. A running VM gets the new order through QMP qom-set on the
// devices' bootindex property, which QEMU reads at the next reset; QEMU rejects
// a bootindex already in use, so each change writes the whole order into the
// other of two disjoint index ranges (1..3 and 11..13).
//
// A Redfish "Once" override is consumed by the next boot the BMC causes
// (power on, ForceRestart, PowerCycle): the VM boots with the override, then
// the default order is restored for later resets. IPMI (ipmi_sim) does not pass
// the persistent flag to chassis_control, so boot devices set through IPMI are
// kept until changed (Continuous).
//
// # Firmware updates and RAID volumes
//
// The UpdateService's SimpleUpdate runs a task of update_seconds and then
// changes the component's version (update.go); a BIOS image flashed while
// the VM runs waits for its next start or ForceRestart (the task stays
// Running with the Base registry's ResetRequired message), as a server's
// BIOS does. Storage volumes (storage.go) are real disks to the guest: at
// the VM's next start or reset (a new QEMU) each volume is one empty qcow2 image of its capacity
// (state_dir/NAME/volume-ID.qcow2) attached as a SCSI disk (virtio-scsi)
// whose WWN is the volume's NAA name, in place of its member drives; a
// volume that holds the VM's disk takes the disk's place in the boot order.
// A RAID level is not simulated: the image is the volume, not its drives.
//
// # Event subscriptions
//
// The EventService (events.go) keeps Redfish event subscriptions (create,
// list, read, delete) for the life of the server, refusing a Destination
// that is not an http(s) URL, a Protocol other than Redfish, a Context
// longer than 256 characters or an event type it does not send. Its one
// event is EventService.SubmitTestEvent's Alert, POSTed to each
// subscription's Destination with the subscription's HttpHeaders, which
// no response shows.
package vbmc
