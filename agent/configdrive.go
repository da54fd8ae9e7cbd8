package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/ironflow/ironflow/configdrive"
)

// The config drive partition, as IPA makes it.
const (
	// configDrivePartSize is the partition IPA creates at the end of a
	// whole-disk image's disk (0:-64MB:0).
	configDrivePartSize = 64 << 20
	// partAlign aligns new partitions to 1 MiB.
	partAlign  = 1 << 20
	sectorSize = 512
)

// diskFile adapts a Device to go-diskfs's backend.WritableFile.
type diskFile struct {
	Device
	off int64
}

var _ backend.WritableFile = (*diskFile)(nil)

func (d *diskFile) Stat() (fs.FileInfo, error) { return diskInfo{size: d.Size()}, nil }

func (d *diskFile) Read(p []byte) (int, error) {
	n, err := d.ReadAt(p, d.off)
	d.off += int64(n)
	return n, err
}

func (d *diskFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		d.off = offset
	case io.SeekCurrent:
		d.off += offset
	case io.SeekEnd:
		d.off = d.Size() + offset
	}
	return d.off, nil
}

type diskInfo struct{ size int64 }

func (i diskInfo) Name() string       { return "disk" }
func (i diskInfo) Size() int64        { return i.size }
func (i diskInfo) Mode() fs.FileMode  { return 0o600 }
func (i diskInfo) ModTime() time.Time { return time.Time{} }
func (i diskInfo) IsDir() bool        { return false }
func (i diskInfo) Sys() any           { return nil }

// readGPT returns the disk's GPT, or nil when it has none.
func readGPT(dev Device) *gpt.Table {
	t, err := gpt.Read(&diskFile{Device: dev}, sectorSize, sectorSize)
	if err != nil {
		return nil
	}
	return t
}

// readMBR returns the disk's MBR table (not a GPT's protective MBR), or nil.
func readMBR(dev Device) *mbr.Table {
	t, err := mbr.Read(&diskFile{Device: dev}, sectorSize, sectorSize)
	if err != nil {
		return nil
	}
	for _, p := range t.Partitions {
		if p.Type == mbr.GPTProtective {
			return nil
		}
	}
	return t
}

// fixPartitionTable moves a GPT's backup header to the end of the disk (an
// image is usually smaller than the disk) and reports the table type.
func fixPartitionTable(dev Device) (string, error) {
	if t := readGPT(dev); t != nil {
		if t.TotalSize() != uint64(dev.Size()) {
			t.Resize(uint64(dev.Size() / sectorSize * sectorSize))
			if err := t.Write(&diskFile{Device: dev}, dev.Size()); err != nil {
				return "gpt", fmt.Errorf("move the backup GPT to the end of the disk: %w", err)
			}
		}
		return "gpt", nil
	}
	if readMBR(dev) != nil {
		return "mbr", nil
	}
	return "none", nil
}

// loadConfigDrive returns the config drive ISO of a deploy: fetched when it
// is a URL, then decoded by the configdrive package (gzip+base64, or the
// image itself from a URL).
func loadConfigDrive(ctx context.Context, hc *http.Client, v string) ([]byte, error) {
	if !configdrive.IsURL(v) {
		return configdrive.Decode(v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v, nil)
	if err != nil {
		return nil, fmt.Errorf("config drive URL %s: %w", redactURL(v), err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download config drive %s: %w", redactURL(v), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download config drive %s: HTTP %d", redactURL(v), resp.StatusCode)
	}
	// The base64 form of a drive at the size limit is a third larger.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 2*configdrive.MaxSize))
	if err != nil {
		return nil, fmt.Errorf("download config drive %s: %w", redactURL(v), err)
	}
	return configdrive.DecodeDownloaded(body)
}

// writeConfigDrive adds a config-2 partition at the end of the disk and
// writes data into it. It returns the partition number.
func writeConfigDrive(dev Device, data []byte) (int, error) {
	size := dev.Size() / sectorSize * sectorSize
	partBytes := int64(max(configDrivePartSize, (len(data)+partAlign-1)/partAlign*partAlign))
	if t := readGPT(dev); t != nil {
		return writeConfigDriveGPT(dev, t, size, partBytes, data)
	}
	if t := readMBR(dev); t != nil {
		return writeConfigDriveMBR(dev, t, size, partBytes, data)
	}
	return 0, errors.New("cannot add a config drive partition: the image has no partition table")
}

func writeConfigDriveGPT(dev Device, t *gpt.Table, size, partBytes int64, data []byte) (int, error) {
	t.Resize(uint64(size))
	last := t.LastDataSector()
	end := last
	start := ((end+1)*sectorSize - uint64(partBytes)) / partAlign * partAlign / sectorSize
	used := map[int]bool{}
	for _, p := range t.Partitions {
		if p.Type == gpt.Unused {
			continue
		}
		used[p.Index] = true
		if p.Name == configdrive.Label {
			return 0, fmt.Errorf("the image already has a %s partition (%d)", configdrive.Label, p.Index)
		}
		if p.End >= start {
			return 0, fmt.Errorf("no room for a %d-byte config drive partition after partition %d (ends at sector %d)", partBytes, p.Index, p.End)
		}
	}
	idx := 1
	for used[idx] {
		idx++
	}
	t.Partitions = append(t.Partitions, &gpt.Partition{
		Index: idx, Start: start, End: end, Size: (end - start + 1) * sectorSize,
		Type: gpt.LinuxFilesystem, Name: configdrive.Label,
	})
	if err := t.Write(&diskFile{Device: dev}, size); err != nil {
		return 0, fmt.Errorf("write GPT with the config drive partition: %w", err)
	}
	if _, err := dev.WriteAt(data, int64(start)*sectorSize); err != nil {
		return 0, fmt.Errorf("write config drive: %w", err)
	}
	return idx, nil
}

func writeConfigDriveMBR(dev Device, t *mbr.Table, size, partBytes int64, data []byte) (int, error) {
	sectors := size / sectorSize
	// MBR addresses 2^32 sectors: put the partition below 2 TiB on larger disks.
	sectors = min(sectors, 1<<32-1)
	start := (sectors*sectorSize - partBytes) / partAlign * partAlign / sectorSize
	slot := -1
	for i, p := range t.Partitions {
		if p.Type == mbr.Empty || p.Size == 0 {
			if slot < 0 {
				slot = i
			}
			continue
		}
		if int64(p.Start)+int64(p.Size) > start {
			return 0, fmt.Errorf("no room for a %d-byte config drive partition after partition %d", partBytes, i+1)
		}
	}
	if slot < 0 {
		return 0, errors.New("cannot add a config drive partition: the MBR's four primary partitions are in use")
	}
	t.Partitions[slot] = &mbr.Partition{Index: slot + 1, Type: mbr.Linux, Start: uint32(start), Size: uint32(sectors - start)}
	if err := t.Write(&diskFile{Device: dev}, size); err != nil {
		return 0, fmt.Errorf("write MBR with the config drive partition: %w", err)
	}
	if _, err := dev.WriteAt(data, start*sectorSize); err != nil {
		return 0, fmt.Errorf("write config drive: %w", err)
	}
	return slot + 1, nil
}
