package pxe

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTFTPRead drives the TFTP read handler with arbitrary file names: it
// never panics, and whatever it serves is a file under the root.
func FuzzTFTPRead(f *testing.F) {
	for _, s := range []string{"undionly.kpxe", "ipxe.efi", "../etc/passwd", "/etc/passwd", "a/../../b", `..\x`, "sub/file", "", "a\x00b", "sub/../undionly.kpxe", "./ipxe.efi"} {
		f.Add(s)
	}
	root := f.TempDir()
	outside := filepath.Join(filepath.Dir(root), "outside-secret")
	_ = os.WriteFile(outside, []byte("SECRET"), 0o644)
	_ = os.WriteFile(filepath.Join(root, "undionly.kpxe"), []byte("BIOS-LOADER"), 0o644)
	_ = os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(root, "sub", "file"), []byte("SUBFILE"), 0o644)
	_ = os.Symlink(outside, filepath.Join(root, "escape"))
	s, err := NewTFTPServer(TFTPConfig{Root: root}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		var buf bytes.Buffer
		err := s.read(name, readerFromBuffer{&buf})
		if err == nil && strings.Contains(buf.String(), "SECRET") {
			t.Fatalf("TFTP name %q served a file outside the root", name)
		}
	})
}

type readerFromBuffer struct{ b *bytes.Buffer }

func (r readerFromBuffer) ReadFrom(rd io.Reader) (int64, error) {
	return r.b.ReadFrom(rd)
}

// FuzzISOKernelCommandLine: an agent ISO's command line never carries a
// character that would split or end it, whatever the parameters.
func FuzzISOKernelCommandLine(f *testing.F) {
	f.Add("http://10.0.0.1:6385", "tok", "console=ttyS0")
	f.Add("http://x\ny", "a b", "x\x00")
	f.Fuzz(func(t *testing.T, apiURL, token, extra string) {
		line, err := ISOParams{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", APIURL: apiURL, AgentToken: token, KernelParams: extra}.KernelCommandLine()
		if err != nil {
			return
		}
		if strings.ContainsAny(line, "\n\r\x00") {
			t.Fatalf("command line %q carries a line break or NUL", line)
		}
	})
}
