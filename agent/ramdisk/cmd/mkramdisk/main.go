// Command mkramdisk builds ironflow's agent ramdisk into .data/ramdisk:
//
//	scripts/fetch-kernel.sh && go run ./agent/ramdisk/cmd/mkramdisk -out .data/ramdisk
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/grub"
	"github.com/ironflow/ironflow/agent/ramdisk"
)

func main() {
	kernel := flag.String("kernel", ".data/kernel", "directory with vmlinuz, version and modules/ (scripts/fetch-kernel.sh)")
	out := flag.String("out", ".data/ramdisk", "output directory")
	agentBin := flag.String("agent", "", "prebuilt static agent binary (default: build ./cmd/ironflow-agent)")
	grubDir := flag.String("grub", grub.DefaultDir, "GRUB's i386-pc boot.img and modules (Debian's grub-pc-bin), for partition images in BIOS boot mode; empty: none (such partition images deploy in UEFI mode only)")
	caBundle := flag.String("ca-bundle", "", "PEM CA bundle the agent trusts for HTTPS (an https API or image server); default: the build host's "+ramdisk.DefaultCABundle+" when present; - for none")
	sdboot := flag.String("systemd-boot", "", "systemd-boot EFI binary the agent installs for partition images (default: the build host's "+ramdisk.DefaultSystemdBoot+" when present); - for none (the arm64 ramdisk: the host's is x86-64)")
	mdadm := flag.String("mdadm", "", "mdadm binary for the software RAID steps (default: the build host's "+ramdisk.DefaultMdadm+" when present); - for none (the arm64 ramdisk: the host's is x86-64)")
	steps := flag.String("custom-steps", "", "a directory of custom deploy steps (executables named as steps: static or dynamic programs, or #! scripts whose interpreter the build host has) carried at "+agent.DefaultCustomStepsDir+" with what they need; docs/bmcs-and-boot.md, custom-agent")
	force := flag.Bool("force", false, "rebuild even when inputs are unchanged")
	flag.Parse()
	res, err := ramdisk.Build(ramdisk.Options{KernelDir: *kernel, OutDir: *out, Agent: *agentBin, ModuleRoot: ".", Force: *force, GRUBDir: *grubDir, CABundle: *caBundle, SystemdBoot: *sdboot, Mdadm: *mdadm, CustomSteps: *steps})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkramdisk:", err)
		os.Exit(1)
	}
	if res.Cached {
		fmt.Printf("mkramdisk: %s is up to date\n", res.Initramfs)
		return
	}
	fmt.Printf("mkramdisk: %s (%d kernel modules) and %s\n", res.Initramfs, len(res.Modules), res.Kernel)
}
