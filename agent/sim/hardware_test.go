package sim

import (
	"bytes"
	"testing"

	"github.com/ironflow/ironflow/agent"
)

// TestKeepWritesRemembersTheMiddleOfTheDisk: by default a simulated disk
// forgets what is written between its first and last MiB; with KeepWrites
// it reads back every byte written, across chunk boundaries, and zeros
// where nothing was written.
func TestKeepWritesRemembersTheMiddleOfTheDisk(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes: several chunks
	const off = 600<<20 + 12345
	for _, keepAll := range []bool{false, true} {
		h := NewHardware(nil, 1<<30)
		if keepAll {
			h.KeepWrites()
		}
		d, err := h.Open(agent.BlockDevice{Name: "/dev/vda"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data)+200)
		if _, err := d.ReadAt(got, off-100); err != nil {
			t.Fatal(err)
		}
		remembered := bytes.Equal(got[100:100+len(data)], data)
		if remembered != keepAll {
			t.Errorf("KeepWrites %v: the middle of the disk remembered %v", keepAll, remembered)
		}
		if keepAll && (!bytes.Equal(got[:100], make([]byte, 100)) || !bytes.Equal(got[100+len(data):], make([]byte, 100))) {
			t.Errorf("KeepWrites: bytes around the write are not zero")
		}
	}
}
