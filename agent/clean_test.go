package agent

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func TestEraseDevicesMetadata(t *testing.T) {
	api := newFakeAPI(t)
	const size = 32 << 20
	hw := newFileHardware(t, size, size)
	img := gptImage(t)
	for i := range 2 {
		f, _ := os.OpenFile(hw.path(i), os.O_RDWR, 0)
		f.WriteAt(img, 0)
		dev := fileDevice{File: f, size: size}
		if _, err := fixPartitionTable(dev); err != nil {
			t.Fatal(err)
		}
		// A filesystem signature 64 KiB into partition 2, data in the middle.
		f.WriteAt([]byte("_BHRfS_M"), 8192*512+64<<10+64)
		f.WriteAt([]byte("keep me"), 20<<20)
		f.Close()
	}
	_, c := startAgent(t, api, hw, nil)
	ctx := context.Background()
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: "erase_devices_metadata", Interface: "deploy", Priority: 99}, nil, nil)
	if err == nil {
		_, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		disk, _ := os.ReadFile(hw.path(i))
		zero := make([]byte, 1<<20)
		if !bytes.Equal(disk[:1<<20], zero) || !bytes.Equal(disk[size-1<<20:], zero) {
			t.Fatalf("disk %d: partition tables not wiped", i)
		}
		if bytes.Contains(disk, []byte("_BHRfS_M")) {
			t.Fatalf("disk %d: filesystem signature survived", i)
		}
		if !bytes.Contains(disk, []byte("keep me")) {
			t.Fatalf("disk %d: metadata erase touched data in the middle", i)
		}
		f, _ := os.Open(hw.path(i))
		if readGPT(fileDevice{File: f, size: size}) != nil || readMBR(fileDevice{File: f, size: size}) != nil {
			t.Fatalf("disk %d: a partition table is still readable", i)
		}
		f.Close()
	}
}

func TestEraseDevices(t *testing.T) {
	api := newFakeAPI(t)
	hw := newFileHardware(t, 8<<20)
	f, _ := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	f.WriteAt(bytes.Repeat([]byte{0xab}, 8<<20), 0)
	f.Close()
	_, c := startAgent(t, api, hw, nil)
	ctx := context.Background()
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: "erase_devices"}, nil, nil)
	if err == nil {
		_, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	disk, _ := os.ReadFile(hw.path(0))
	if !bytes.Equal(disk, make([]byte, 8<<20)) {
		t.Fatal("disk not zeroed")
	}
}
