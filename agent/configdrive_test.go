package agent

import (
	"bytes"
	"encoding/base64"
	"os"
	"testing"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/klauspost/compress/gzip"

	"github.com/ironflow/ironflow/configdrive"
)

// gptImage builds an 8 MiB whole-disk image with one GPT partition.
func gptImage(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	p := dir + "/img"
	const size = 8 << 20
	os.WriteFile(p, nil, 0o600)
	os.Truncate(p, size)
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	tbl := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true, Partitions: []*gpt.Partition{
		{Index: 1, Start: 2048, End: 8191, Type: gpt.EFISystemPartition, Name: "esp"},
		{Index: 2, Start: 8192, End: 16000, Type: gpt.LinuxFilesystem, Name: "root"},
	}}
	if err := tbl.Write(&diskFile{Device: fileDevice{File: f, size: size}}, size); err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte("root"), 1024), 8192*512)
	f.Close()
	b, _ := os.ReadFile(p)
	return b
}

func gzb64(b []byte) string {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestConfigDrivePlacement(t *testing.T) {
	iso := append([]byte("CD001 config-2 "), bytes.Repeat([]byte{7}, 300<<10)...)
	const diskSize = 160 << 20
	for _, tc := range []struct {
		name  string
		image []byte
		cd    func(srvURL string) string
	}{
		{"gpt gzip+base64", gptImage(t), func(string) string { return gzb64(iso) }},
		{"mbr gzip+base64", testImage(4 << 20), func(string) string { return gzb64(iso) }},
		{"gpt URL raw iso", gptImage(t), func(u string) string { return u + "/cd.iso" }},
		{"mbr URL gzip+base64", testImage(4 << 20), func(u string) string { return u + "/cd.b64" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newImageServer(t, map[string][]byte{"disk.img": tc.image, "cd.iso": iso, "cd.b64": []byte(gzb64(iso))})
			api := newFakeAPI(t)
			hw := newFileHardware(t, diskSize)
			_, c := startAgent(t, api, hw, nil)
			_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.img", "image_checksum": sha256hex(tc.image), "configdrive": tc.cd(srv.URL)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := os.Open(hw.path(0))
			defer f.Close()
			dev := fileDevice{File: f, size: diskSize}
			var start int64
			if g := readGPT(dev); g != nil {
				if g.TotalSize() != diskSize {
					t.Fatalf("backup GPT not moved to the end: table covers %d bytes", g.TotalSize())
				}
				var found bool
				for _, p := range g.Partitions {
					if p.Name == configdrive.Label {
						found, start = true, int64(p.Start)*512
						if end := int64(p.End+1) * 512; end < diskSize-1<<20 || int64(p.End-p.Start+1)*512 < 60<<20 {
							t.Fatalf("config-2 partition %d-%d not a ~64 MiB partition at the end", p.Start, p.End)
						}
					}
					if p.Name == "root" && p.Start != 8192 {
						t.Fatal("image partition moved")
					}
				}
				if !found {
					t.Fatalf("no config-2 partition: %+v", g.Partitions)
				}
			} else if m := readMBR(dev); m != nil {
				p := m.Partitions[1]
				if p.Type != mbr.Linux || int64(p.Start+p.Size)*512 != diskSize || m.Partitions[0].Start != 2048 {
					t.Fatalf("MBR partitions %+v %+v", m.Partitions[0], p)
				}
				start = int64(p.Start) * 512
			} else {
				t.Fatal("no partition table after write")
			}
			got := make([]byte, len(iso))
			f.ReadAt(got, start)
			if !bytes.Equal(got, iso) {
				t.Fatal("config drive content not at the partition start")
			}
		})
	}
}

func TestConfigDriveWithoutPartitionTable(t *testing.T) {
	img := bytes.Repeat([]byte{1}, 1<<20)
	srv := newImageServer(t, map[string][]byte{"disk.img": img})
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 128<<20), nil)
	_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.img", "image_checksum": sha256hex(img), "configdrive": gzb64([]byte("x"))}, nil)
	if err == nil {
		t.Fatal("config drive on a disk without a partition table accepted")
	}
}
