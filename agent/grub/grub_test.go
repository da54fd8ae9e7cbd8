package grub

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// grubPCBin skips without Debian's grub-pc-bin, which makes the core
// images and holds the reference grub-bios-setup.
func grubPCBin(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(DefaultDir, BootImage)); err != nil {
		t.Skip("SKIP: GRUB's i386-pc images are not installed (Debian's grub-pc-bin; scripts/install-deps.sh installs it)")
	}
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip("SKIP: grub-mkimage is not installed (Debian's grub-common)")
	}
}

// images makes boot.img and label's core image as ironflow's ramdisk does.
func images(t *testing.T, label string) (boot, core []byte) {
	t.Helper()
	grubPCBin(t)
	out := filepath.Join(t.TempDir(), CoreImage(label))
	if b, err := exec.Command("grub-mkimage", MkImageArgs(DefaultDir, label, out)...).CombinedOutput(); err != nil {
		t.Fatalf("grub-mkimage: %v\n%s", err, b)
	}
	boot, err := os.ReadFile(filepath.Join(DefaultDir, BootImage))
	if err != nil {
		t.Fatal(err)
	}
	if core, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	return boot, core
}

// disk makes an 8 MiB disk file partitioned by sfdisk with script, and
// with noise in sector 0's boot code and BPB and in the embedding area, so
// that what Setup keeps and what it overwrites both show.
func disk(t *testing.T, script string) string {
	t.Helper()
	if _, err := exec.LookPath("sfdisk"); err != nil {
		t.Skip("SKIP: sfdisk (util-linux) is not installed")
	}
	p := filepath.Join(t.TempDir(), "disk.img")
	noise := make([]byte, 2048*SectorSize)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	clear(noise[0x1b8:SectorSize])
	if err := os.WriteFile(p, noise, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 8<<20); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sfdisk", "-q", "--wipe", "never", p)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	return p
}

type fileDisk struct{ *os.File }

func setupFile(t *testing.T, path string, boot, core []byte, area Area) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Setup(fileDisk{f}, boot, core, area); err != nil {
		t.Fatal(err)
	}
}

var layouts = []struct {
	label  string
	script string
	area   Area
}{
	// The agent's BIOS layouts: an MBR with its gap before 1 MiB, a GPT
	// with a 1 MiB BIOS boot partition first.
	{"msdos", "label: dos\nstart=2048, size=4096, type=ea\nstart=6144, type=83\n", Area{1, 2047}},
	{"gpt", "label: gpt\nstart=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649\nstart=4096, size=4096, type=BC13C2FF-59E6-4262-A352-B275FD6F7172\nstart=8192, size=4096\n", Area{2048, 2048}},
}

// TestSetupFields checks what Setup writes against GRUB's documented
// layout (include/grub/i386/pc/boot.h, util/setup.c), field by field.
func TestSetupFields(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.label, func(t *testing.T) {
			bootImg, coreImg := images(t, l.label)
			p := disk(t, l.script)
			before, _ := os.ReadFile(p)
			setupFile(t, p, bootImg, coreImg, l.area)
			after, _ := os.ReadFile(p)
			mbr := after[:SectorSize]

			if got := binary.LittleEndian.Uint64(mbr[0x5c:]); got != l.area.Start {
				t.Errorf("boot.img kernel sector %d, want %d", got, l.area.Start)
			}
			if mbr[0x64] != 0xff || mbr[0x66] != 0x90 || mbr[0x67] != 0x90 {
				t.Errorf("boot drive %#x, drive check % x; want 0xff and two NOPs", mbr[0x64], mbr[0x66:0x68])
			}
			if !bytes.Equal(mbr[0x1b8:0x1fe], before[0x1b8:0x1fe]) || !bytes.Equal(mbr[3:0x5a], before[3:0x5a]) {
				t.Error("the disk signature, partition table or BPB area changed")
			}
			for _, r := range [][2]int{{0, 3}, {0x5a, 0x5c}, {0x68, 0x1b8}, {0x1fe, 0x200}} {
				if !bytes.Equal(mbr[r[0]:r[1]], bootImg[r[0]:r[1]]) {
					t.Errorf("sector 0 bytes %#x-%#x are not boot.img's", r[0], r[1])
				}
			}

			start := int(l.area.Start) * SectorSize
			coreSectors := (len(coreImg) + SectorSize - 1) / SectorSize
			nsec := min(int(l.area.Sectors), 2*coreSectors)
			core := after[start : start+nsec*SectorSize]
			// diskboot's blocklist: one entry for sectors start+1.., at
			// segment 0x820, then the terminator.
			bl := core[SectorSize-blocklistSize : SectorSize]
			if s, n, seg := binary.LittleEndian.Uint64(bl), binary.LittleEndian.Uint16(bl[8:]), binary.LittleEndian.Uint16(bl[10:]); s != l.area.Start+1 || int(n) != nsec-1 || seg != 0x820 {
				t.Errorf("blocklist <%d,%d,%#x>, want <%d,%d,0x820>", s, n, seg, l.area.Start+1, nsec-1)
			}
			if !bytes.Equal(core[SectorSize-2*blocklistSize:SectorSize-blocklistSize], make([]byte, blocklistSize)) {
				t.Error("no terminator after the blocklist entry")
			}
			if !bytes.Equal(core[:SectorSize-blocklistSize*2], coreImg[:SectorSize-blocklistSize*2]) {
				t.Error("diskboot.img's code changed")
			}
			red := binary.LittleEndian.Uint32(core[SectorSize+0x10:])
			if int(red) != nsec*SectorSize-len(coreImg) {
				t.Errorf("Reed-Solomon redundancy %d, want %d", red, nsec*SectorSize-len(coreImg))
			}
			if !bytes.Equal(core[SectorSize+0x14:len(coreImg)], coreImg[SectorSize+0x14:]) {
				t.Error("core.img's data changed")
			}
			// The parity makes every column a code word: its syndromes
			// (the word evaluated at 2^j) are zero.
			noRS := int(binary.LittleEndian.Uint16(core[SectorSize+0x14:]))
			checkCodeWords(t, core[SectorSize+noRS:], len(coreImg)-SectorSize-noRS, int(red))
			// Past the area, the disk is as it was.
			if !bytes.Equal(after[start+nsec*SectorSize:], before[start+nsec*SectorSize:]) {
				t.Error("Setup wrote past core.img and its parity")
			}
		})
	}
}

// checkCodeWords verifies the parity of buf[:s] in buf[s:s+rs] by
// syndromes, independently of the encoder.
func checkCodeWords(t *testing.T, buf []byte, s, rs int) {
	t.Helper()
	data, parity := 0, s
	for s > 0 {
		cs, crs := s, rs
		if tt := cs + crs; tt > rsMaxBlock {
			cs = cs * 200 / tt * SectorSize
			crs = crs * 200 / tt * SectorSize
		}
		for i := 0; i < SectorSize; i++ {
			ds, rr := (cs+SectorSize-1-i)/SectorSize, (crs+SectorSize-1-i)/SectorSize
			if ds == 0 || rr == 0 {
				continue
			}
			var word []byte
			for j := 0; j < ds; j++ {
				word = append(word, buf[data+SectorSize*j+i])
			}
			for j := 0; j < rr; j++ {
				word = append(word, buf[parity+SectorSize*j+i])
			}
			for j := 0; j < rr; j++ {
				// Horner with x = 2^j; word[0] is the highest power.
				var v byte
				for _, c := range word {
					v = gfMul(v, gfExp[j]) ^ c
				}
				if v != 0 {
					t.Fatalf("column %d of the chunk at %d: syndrome %d is %#x", i, data, j, v)
				}
			}
		}
		data, parity, s, rs = data+cs, parity+crs, s-cs, rs-crs
	}
}

// TestSetupEqualsGrubBiosSetup runs the real grub-bios-setup on a copy of
// the same disk (through loop devices: it needs its directory on a
// mounted filesystem) and compares the two disks byte for byte, with
// Reed-Solomon codes as grub-install writes them.
func TestSetupEqualsGrubBiosSetup(t *testing.T) {
	const setup = DefaultDir + "/grub-bios-setup"
	for _, l := range layouts {
		t.Run(l.label, func(t *testing.T) {
			bootImg, coreImg := images(t, l.label)
			if _, err := os.Stat(setup); err != nil {
				t.Skip("SKIP: " + setup + " is not installed")
			}
			if os.Geteuid() != 0 {
				t.Skip("SKIP: grub-bios-setup on a file needs loop devices and a mount (root)")
			}
			ours := disk(t, l.script)
			theirs := filepath.Join(t.TempDir(), "theirs.img")
			b, _ := os.ReadFile(ours)
			if err := os.WriteFile(theirs, b, 0o644); err != nil {
				t.Fatal(err)
			}
			setupFile(t, ours, bootImg, coreImg, l.area)

			dir := t.TempDir()
			fs := filepath.Join(dir, "fs.img")
			if err := os.Truncate(fs, 0); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if out, err := exec.Command("sh", "-c", "truncate -s 4M "+fs+" && mkfs.ext2 -q -F "+fs).CombinedOutput(); err != nil {
				t.Skipf("SKIP: cannot make the ext2 image grub-bios-setup reads its files from: %v %s", err, out)
			}
			loop := func(p string) string {
				out, err := exec.Command("losetup", "--find", "--show", p).Output()
				if err != nil {
					t.Skipf("SKIP: losetup %s: %v (no loop devices here)", p, err)
				}
				dev := strings.TrimSpace(string(out))
				t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
				return dev
			}
			diskDev, fsDev := loop(theirs), loop(fs)
			mnt := filepath.Join(dir, "mnt")
			os.Mkdir(mnt, 0o755)
			if out, err := exec.Command("mount", fsDev, mnt).CombinedOutput(); err != nil {
				t.Skipf("SKIP: mount %s: %v %s", fsDev, err, out)
			}
			t.Cleanup(func() { exec.Command("umount", mnt).Run() })
			if err := os.WriteFile(filepath.Join(mnt, "boot.img"), bootImg, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mnt, "core.img"), coreImg, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(setup, "--directory="+mnt, diskDev).CombinedOutput(); err != nil {
				t.Fatalf("grub-bios-setup: %v\n%s", err, out)
			}
			if out, err := exec.Command("losetup", "-d", diskDev).CombinedOutput(); err != nil {
				t.Fatalf("losetup -d: %v %s", err, out)
			}
			want, _ := os.ReadFile(theirs)
			got, _ := os.ReadFile(ours)
			if !bytes.Equal(got, want) {
				n := 0
				for i := range got {
					if got[i] != want[i] {
						if n < 10 {
							t.Errorf("byte %#x (sector %d): ours %#02x, grub-bios-setup's %#02x", i, i/SectorSize, got[i], want[i])
						}
						n++
					}
				}
				t.Fatalf("%d bytes differ from grub-bios-setup's", n)
			}
		})
	}
}

func TestSetupRefuses(t *testing.T) {
	bootImg := make([]byte, SectorSize)
	core := make([]byte, 100*SectorSize)
	read := func(b []byte) error { return nil }
	for name, tc := range map[string]struct {
		boot, core []byte
		area       Area
		want       string
	}{
		"small area":   {bootImg, core, Area{1, 99}, "too small for core.img"},
		"sector 0":     {bootImg, core, Area{0, 2047}, "sector 0"},
		"bad boot.img": {bootImg[:100], core, Area{1, 2047}, "boot.img is 100 bytes"},
		"no terminator": {bootImg, bytes.Repeat([]byte{1}, 100*SectorSize), Area{1, 2047},
			"no terminator"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Images(tc.boot, tc.core, tc.area, read)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// memDisk is a disk in memory.
type memDisk []byte

func (d memDisk) ReadAt(b []byte, off int64) (int, error)  { return copy(b, d[off:]), nil }
func (d memDisk) WriteAt(b []byte, off int64) (int, error) { return copy(d[off:], b), nil }

// TestSetupMD: the md core image (with MDConfig embedded) goes to the
// start of the BIOS boot partition and stays before MDConfigSector, where
// grub.cfg goes, padded with newlines to MDConfigSectors sectors (the
// blocklist MDConfig reads); a partition or a grub.cfg too small for that
// is refused before anything is written.
func TestSetupMD(t *testing.T) {
	grubPCBin(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "md.cfg")
	if err := os.WriteFile(cfgFile, []byte(MDConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, CoreImageMD)
	if b, err := exec.Command("grub-mkimage", MkImageArgs(DefaultDir, "md", out, cfgFile)...).CombinedOutput(); err != nil {
		t.Fatalf("grub-mkimage: %v\n%s", err, b)
	}
	core, _ := os.ReadFile(out)
	boot, _ := os.ReadFile(filepath.Join(DefaultDir, BootImage))
	const start, sectors = 2048, 14336 // raid.create_configuration's BIOS boot partition
	d := make(memDisk, (start+sectors+34)*SectorSize)
	cfg := "configfile (mduuid/00,msdos1)/boot/grub/grub.cfg\n"
	if err := SetupMD(d, boot, core, Area{Start: start, Sectors: sectors}, cfg); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint64(d[bootKernelSector:]) != start {
		t.Errorf("boot.img loads core.img from sector %d", binary.LittleEndian.Uint64(d[bootKernelSector:]))
	}
	at := (start + MDConfigSector) * SectorSize
	got := d[at : at+MDConfigSectors*SectorSize]
	if string(got[:len(cfg)]) != cfg || strings.Trim(string(got[len(cfg):]), "\n") != "" || d[at+MDConfigSectors*SectorSize] != 0 {
		t.Errorf("grub.cfg at sector %d: %q...", start+MDConfigSector, got[:len(cfg)+8])
	}
	if !bytes.Contains([]byte(MDConfig), []byte("configfile ($root)2048+16")) {
		t.Errorf("MDConfig does not read the blocklist SetupMD writes: %s", MDConfig)
	}
	if err := SetupMD(make(memDisk, len(d)), boot, core, Area{Start: start, Sectors: MDConfigSector}, cfg); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("a BIOS boot partition without room for grub.cfg: %v", err)
	}
	if err := SetupMD(make(memDisk, len(d)), boot, core, Area{Start: start, Sectors: sectors}, strings.Repeat("#", MDConfigSectors*SectorSize+1)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a grub.cfg too large: %v", err)
	}
}
