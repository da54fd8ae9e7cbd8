package pxe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

func TestKernelCommandLine(t *testing.T) {
	p := ISOParams{APIURL: "http://10.99.0.1:6385", AgentToken: "s3cret", KernelParams: "console=ttyS0  nofb"}
	got, err := p.KernelCommandLine()
	if err != nil {
		t.Fatal(err)
	}
	want := "console=ttyS0 nofb ipa-api-url=http://10.99.0.1:6385 ipa-agent-token=s3cret"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAgentISOErrorsNeverShowTheToken(t *testing.T) {
	const token = "zq9x en-with-space"
	dir := t.TempDir()
	k := filepath.Join(dir, "k")
	os.WriteFile(k, []byte("k"), 0o644)
	err := BuildAgentISO(context.Background(), filepath.Join(dir, "x.iso"), k, k, ISOParams{NodeUUID: testNode, AgentToken: token})
	if err == nil {
		t.Fatal("a token with whitespace was accepted")
	}
	if strings.Contains(err.Error(), "zq9x") {
		t.Errorf("error shows the token: %v", err)
	}
}

func TestAgentISOLayout(t *testing.T) {
	for _, f := range []string{DefaultISOLinuxBin, DefaultLDLinuxC32, DefaultEFILoader} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING: boot loader %s missing (apt-get install isolinux syslinux-common systemd-boot-efi)", f)
		}
	}
	dir := t.TempDir()
	k := filepath.Join(dir, "vmlinuz")
	i := filepath.Join(dir, "initrd")
	os.WriteFile(k, []byte("kernel"), 0o644)
	os.WriteFile(i, []byte("initrd"), 0o644)
	isos := AgentISOs{Dir: filepath.Join(dir, "isos")}
	p, err := isos.Build(context.Background(), k, i, ISOParams{NodeUUID: testNode, APIURL: "http://a:1", AgentToken: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("ISO mode %v, want 0600: it holds the agent token", st.Mode().Perm())
	}
	f, _ := os.Open(p)
	defer f.Close()
	fs, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := fs.ReadFile("isolinux/isolinux.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "APPEND ipa-api-url=http://a:1 ipa-agent-token=t0k") {
		t.Errorf("isolinux.cfg: %s", cfg)
	}
	for _, name := range []string{"vmlinuz", "initrd", "efiboot.img", "isolinux/isolinux.bin", "isolinux/ldlinux.c32"} {
		if _, err := fs.Stat(name); err != nil {
			t.Errorf("%s missing: %v", name, err)
		}
	}
	// Served under a name with a random key of this build, not its UUID.
	name, err := isos.URLName(testNode)
	if err != nil || !strings.HasPrefix(name, testNode+"-") || len(name) != len(testNode)+1+32+len(".iso") {
		t.Errorf("URL name %q: %v", name, err)
	}
	if err := isos.Remove(testNode); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("ISO still there after Remove: %v", err)
	}
	if _, err := isos.URLName(testNode); err == nil {
		t.Errorf("the ISO's key survives Remove")
	}
	if err := RemoveAgentISO(isos.Dir, testNode); err != nil {
		t.Errorf("second remove: %v", err)
	}
}

func TestMemoryLeases(t *testing.T) {
	l := NewMemoryLeases()
	first, last := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")
	ctx := context.Background()
	macs := []string{"52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03"}
	a1, err := l.Allocate(ctx, mustMAC(macs[0]), "n1", first, last, DefaultLeaseTime)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := l.Allocate(ctx, mustMAC(macs[1]), "n2", first, last, DefaultLeaseTime)
	if a1 == a2 {
		t.Errorf("two MACs share %s", a1)
	}
	if again, _ := l.Allocate(ctx, mustMAC(macs[0]), "n1", first, last, DefaultLeaseTime); again != a1 {
		t.Errorf("MAC moved from %s to %s", a1, again)
	}
	if _, err := l.Allocate(ctx, mustMAC(macs[2]), "n3", first, last, DefaultLeaseTime); err == nil {
		t.Error("exhausted pool handed out an address")
	}
	// An expired lease is reused when the pool is full.
	if _, err := l.Allocate(ctx, mustMAC(macs[1]), "n2", first, last, -1); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Allocate(ctx, mustMAC(macs[2]), "n3", first, last, DefaultLeaseTime); err != nil || got != a2 {
		t.Errorf("got %s, %v; want the expired %s", got, err, a2)
	}
}

// TestAgentISOSecureBootLayout: with SecureBoot the UEFI image holds shim
// as the removable-media loader, signed GRUB next to it under the name
// shim loads, and GRUB's configuration where Debian's signed GRUB reads
// it; without, systemd-boot as before.
func TestAgentISOSecureBootLayout(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeTestFile(t, dir, name, content) }
	params := ISOParams{NodeUUID: testNode, APIURL: "http://a:1", AgentToken: "t0k",
		ISOLinuxBin: write("isolinux.bin", strings.Repeat("i", 2048)) /* room for the boot info table */, LDLinuxC32: write("ldlinux.c32", "ldlinux"),
		EFILoader: write("systemd-boot.efi", "systemd-boot"), Shim: write("shim.efi", "shim"), SignedGrub: write("grub.efi", "grub")}
	k, i := write("vmlinuz", "kernel"), write("initrd", "initrd")
	for _, secure := range []bool{true, false} {
		params.SecureBoot = secure
		out := filepath.Join(dir, fmt.Sprintf("sb-%v.iso", secure))
		if err := BuildAgentISO(context.Background(), out, k, i, params); err != nil {
			t.Fatal(err)
		}
		efi := efiBootFiles(t, out)
		want := map[string]string{"/EFI/BOOT/BOOTX64.EFI": "systemd-boot", "/vmlinuz": "kernel", "/initrd": "initrd"}
		if secure {
			want["/EFI/BOOT/BOOTX64.EFI"], want["/EFI/BOOT/grubx64.efi"] = "shim", "grub"
		}
		for name, content := range want {
			if got, err := efi(name); err != nil || got != content {
				t.Errorf("secure boot %v: %s = %q, %v; want %q", secure, name, got, err, content)
			}
		}
		cfg, err := efi("/EFI/debian/grub.cfg")
		if secure && (err != nil || !strings.Contains(cfg, "linux /vmlinuz ipa-api-url=http://a:1 ipa-agent-token=t0k") || !strings.Contains(cfg, "initrd /initrd")) {
			t.Errorf("grub.cfg %q, %v", cfg, err)
		}
		if !secure && err == nil {
			t.Errorf("the unsigned chain carries a grub.cfg: %q", cfg)
		}
		// Where the signed GRUB's built-in configuration finds its own
		// when it cannot name the El Torito image: the ISO9660 tree.
		_, infoErr := isoFile(t, out, ".disk/info")
		treeCfg, treeErr := isoFile(t, out, "boot/grub/grub.cfg")
		if secure && (infoErr != nil || treeErr != nil || treeCfg != cfg) {
			t.Errorf("ISO tree: .disk/info %v, boot/grub/grub.cfg %q, %v", infoErr, treeCfg, treeErr)
		}
		if !secure && (infoErr == nil || treeErr == nil) {
			t.Errorf("the unsigned chain's ISO carries GRUB's files")
		}
	}
}

// efiBootFiles opens the ISO's El Torito UEFI image and returns a reader
// of its files.
func efiBootFiles(t *testing.T, iso string) func(string) (string, error) {
	t.Helper()
	f, err := os.Open(iso)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	fs, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	img, err := fs.ReadFile("efiboot.img")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "efiboot.img")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	fat, err := fat32.Read(file.New(g, true), int64(len(img)), 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) (string, error) {
		b, err := fat.ReadFile(name)
		return string(b), err
	}
}

// isoFile extracts name from the ISO9660 tree of iso with xorriso (the
// go-diskfs reader fails on some of the Rock Ridge directories its writer
// makes, which GRUB and the kernel read well).
func isoFile(t *testing.T, iso, name string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Skip("SKIPPING: xorriso missing (apt-get install xorriso)")
	}
	dst := filepath.Join(t.TempDir(), "f")
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/"+name, dst).CombinedOutput(); err != nil {
		return "", fmt.Errorf("xorriso: %w: %s", err, out)
	}
	b, err := os.ReadFile(dst)
	return string(b), err
}

// TestAgentISOMissingFilesSayWhatInstallsThem: a boot loader missing from
// its Debian path is reported with the package that installs it and the
// command that does (make run), a missing agent ramdisk with make ramdisk;
// the error still wraps the stat error. The machine under test may have
// the real loaders, so a missing one stands in for a Debian path.
func TestAgentISOMissingFilesSayWhatInstallsThem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeTestFile(t, dir, name, content) }
	missingDefault := filepath.Join(dir, "usr", "lib", "ISOLINUX", "isolinux.bin")
	ISOHostPackages[missingDefault] = "isolinux"
	t.Cleanup(func() { delete(ISOHostPackages, missingDefault) })
	present := ISOParams{NodeUUID: testNode, ISOLinuxBin: write("isolinux.bin", "i"), LDLinuxC32: write("ldlinux.c32", "l"),
		EFILoader: write("systemd-boot.efi", "s"), Shim: write("shim.efi", "s"), SignedGrub: write("grub.efi", "g")}
	k, i := write("vmlinuz", "kernel"), write("initrd", "initrd")
	for _, c := range []struct {
		name          string
		kernel        string
		change        func(*ISOParams)
		want, wantNot []string
	}{
		{"default isolinux.bin missing", k, func(p *ISOParams) { p.ISOLinuxBin = missingDefault },
			[]string{missingDefault, "Debian's isolinux", "make run", "scripts/install-deps.sh run"}, nil},
		{"operator's own loader missing", k, func(p *ISOParams) { p.EFILoader = filepath.Join(dir, "mine.efi") },
			[]string{"mine.efi"}, []string{"Debian's"}},
		{"agent kernel missing", filepath.Join(dir, "agent.kernel"), func(*ISOParams) {},
			[]string{"agent.kernel", "make ramdisk"}, []string{"Debian's"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := present
			c.change(&p)
			err := BuildAgentISO(context.Background(), filepath.Join(dir, "x.iso"), c.kernel, i, p)
			if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("got %v, want an error wrapping os.ErrNotExist", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%v\nsays %q", err, w)
				}
			}
		})
	}
}

// writeTestFile writes content to dir/name and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentISOCarriesNetworkData: a node's network_data is on its agent
// ISO as openstack/latest/network_data.json, byte for byte, where the
// agent looks for it; an ISO built without network_data has no such file.
func TestAgentISOCarriesNetworkData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeTestFile(t, dir, name, content) }
	params := ISOParams{NodeUUID: testNode, APIURL: "http://a:1", AgentToken: "t0k",
		ISOLinuxBin: write("isolinux.bin", strings.Repeat("i", 2048)), LDLinuxC32: write("ldlinux.c32", "ldlinux"),
		EFILoader: write("systemd-boot.efi", "systemd-boot")}
	k, i := write("vmlinuz", "kernel"), write("initrd", "initrd")
	nd := `{"links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:aa:bb:cc"}], "networks": [], "services": []}`
	with := filepath.Join(dir, "with.iso")
	params.NetworkData = []byte(nd)
	if err := BuildAgentISO(context.Background(), with, k, i, params); err != nil {
		t.Fatal(err)
	}
	if got, err := isoFile(t, with, NetworkDataPath); err != nil || got != nd {
		t.Errorf("%s on the ISO = %q, %v; want %q", NetworkDataPath, got, err, nd)
	}
	without := filepath.Join(dir, "without.iso")
	params.NetworkData = nil
	if err := BuildAgentISO(context.Background(), without, k, i, params); err != nil {
		t.Fatal(err)
	}
	if got, err := isoFile(t, without, NetworkDataPath); err == nil {
		t.Errorf("an ISO built without network_data holds %s: %q", NetworkDataPath, got)
	}
}
