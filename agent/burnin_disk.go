package agent

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// burnin_disk writes a pattern over each disk and reads it back, pass
// after pass, on every disk at once as IPA's fio job does. It destroys the
// disks' data.
//
// Its checkpoint lives in diskReserve at the end of each disk under test
// (which the passes never touch): a 4 KiB record with the pass, the phase
// (write or verify), the offset reached, the time spent and the counts,
// written every checkpointEvery after a sync of the data before it. A run
// that finds a record made with the same arguments resumes from it; the
// record is wiped when the burn-in finishes.
const (
	diskReserve     = 1 << 20
	checkpointBlock = 4096
	checkpointEvery = 5 * time.Second
	burnChunk       = 4 << 20
	checkpointMagic = "IRONFLOW-BURNIN-DISK-1"
	// simDiskRange is what a simulated disk is tested over: the part it
	// keeps in memory (agent/sim keeps each end's first MiB).
	simDiskRange = 1 << 20
)

// diskCheckpoint is the record at the end of a disk under test.
type diskCheckpoint struct {
	Magic   string `json:"magic"`
	Seed    uint64 `json:"seed"`
	Runtime int64  `json:"runtime"`
	Loops   int64  `json:"loops"`
	Size    int64  `json:"size"`
	Pass    int64  `json:"pass"`
	Verify  bool   `json:"verify"`
	Offset  int64  `json:"offset"`
	// End is where the pass's writes ended (the verify's range).
	End     int64   `json:"end"`
	Elapsed float64 `json:"elapsed_seconds"`
	Errors  int64   `json:"errors"`
	Written int64   `json:"bytes_written"`
	Read    int64   `json:"bytes_read"`
}

func readDiskCheckpoint(dev Device) (diskCheckpoint, bool) {
	var cp diskCheckpoint
	if dev.Size() < 2*diskReserve {
		return cp, false
	}
	b := make([]byte, checkpointBlock)
	if _, err := dev.ReadAt(b, dev.Size()-diskReserve); err != nil {
		return cp, false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if json.Unmarshal(b, &cp) != nil || cp.Magic != checkpointMagic || cp.Size != dev.Size() {
		return diskCheckpoint{}, false
	}
	return cp, true
}

func writeDiskCheckpoint(dev Device, cp *diskCheckpoint) error {
	b, err := json.Marshal(cp)
	if err != nil || len(b) >= checkpointBlock {
		return fmt.Errorf("encode checkpoint: %v", err)
	}
	block := make([]byte, checkpointBlock)
	copy(block, b)
	if _, err := dev.WriteAt(block, dev.Size()-diskReserve); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return dev.Sync()
}

func clearDiskCheckpoint(dev Device) error {
	if _, err := dev.WriteAt(make([]byte, checkpointBlock), dev.Size()-diskReserve); err != nil {
		return fmt.Errorf("clear checkpoint: %w", err)
	}
	return dev.Sync()
}

// fillPattern fills b with the pattern of (seed, pass) at disk offset off:
// every 8 bytes hold a mix of their own offset, so a block written to or
// read from the wrong place is caught too.
func fillPattern(b []byte, seed uint64, pass, off int64) {
	k := seed ^ uint64(pass)*0xbf58476d1ce4e5b9
	for i := 0; i+8 <= len(b); i += 8 {
		x := uint64(off+int64(i)) ^ k
		x ^= x >> 31
		x *= 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[i:], x)
	}
}

// diskBurn is one disk's burn-in.
type diskBurn struct {
	name  string
	dev   Device
	cp    diskCheckpoint
	limit int64 // bytes tested: [0, limit)
	mu    sync.Mutex
}

func (d *diskBurn) snapshot() diskCheckpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cp
}

func (d *diskBurn) update(f func(*diskCheckpoint)) {
	d.mu.Lock()
	f(&d.cp)
	d.mu.Unlock()
}

// run drives the passes until the burn-in's end: loops passes, or until
// deadline (runtime), then finishes the pass's verify over what it wrote.
func (d *diskBurn) run(ctx context.Context, clock burnClock, loops int64, timed bool) error {
	buf := alignedBuffer(burnChunk)
	want := alignedBuffer(burnChunk)
	lastCP := time.Now()
	checkpoint := func(force bool) error {
		if !force && time.Since(lastCP) < checkpointEvery {
			return nil
		}
		if err := d.dev.Sync(); err != nil {
			return err
		}
		cp := d.snapshot()
		cp.Elapsed = clock.elapsed().Seconds()
		lastCP = time.Now()
		return writeDiskCheckpoint(d.dev, &cp)
	}
	for {
		cp := d.snapshot()
		if !timed && cp.Pass >= loops || timed && clock.remaining() == 0 && !cp.Verify && cp.Offset == 0 {
			return nil
		}
		if !cp.Verify {
			end := d.limit
			for off := cp.Offset; off < end; off += burnChunk {
				if err := ctx.Err(); err != nil {
					return err
				}
				if timed && clock.remaining() == 0 {
					// Time is up: verify what this pass wrote.
					end = off
					break
				}
				n := min(int64(burnChunk), end-off)
				fillPattern(buf[:n], d.cp.Seed, cp.Pass, off)
				if _, err := d.dev.WriteAt(buf[:n], off); err != nil {
					return fmt.Errorf("write at %d: %w", off, err)
				}
				d.update(func(c *diskCheckpoint) { c.Offset, c.Written = off+n, c.Written+n })
				if err := checkpoint(false); err != nil {
					return err
				}
			}
			if err := d.dev.Sync(); err != nil {
				return err
			}
			dropCache(d.dev)
			d.update(func(c *diskCheckpoint) { c.Verify, c.Offset, c.End = true, 0, end })
			if err := checkpoint(true); err != nil {
				return err
			}
		}
		cp = d.snapshot()
		end := cp.End
		for off := cp.Offset; off < end; off += burnChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(int64(burnChunk), end-off)
			if _, err := d.dev.ReadAt(buf[:n], off); err != nil {
				return fmt.Errorf("read at %d: %w", off, err)
			}
			fillPattern(want[:n], d.cp.Seed, cp.Pass, off)
			var bad int64
			if !bytes.Equal(buf[:n], want[:n]) {
				for i := int64(0); i < n; i += 512 {
					if !bytes.Equal(buf[i:min(i+512, n)], want[i:min(i+512, n)]) {
						bad++
					}
				}
			}
			d.update(func(c *diskCheckpoint) { c.Offset, c.Read, c.Errors = off+n, c.Read+n, c.Errors+bad })
			if err := checkpoint(false); err != nil {
				return err
			}
		}
		d.update(func(c *diskCheckpoint) { c.Pass++; c.Verify, c.Offset, c.End = false, 0, 0 })
		if err := checkpoint(true); err != nil {
			return err
		}
		if timed && clock.remaining() == 0 {
			return nil
		}
	}
}

// burninDisk is burnin_disk.
func (a *Agent) burninDisk(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	runtimeSec := s.integer("runtime", "", 0)
	loops := s.integer("loops", "", defaultBurninLoops)
	if s.err != nil {
		return nil, s.err
	}
	if runtimeSec == 0 && loops == 0 {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "burnin_disk: runtime and loops are both 0")
	}
	devs, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, errors.New("burnin_disk: no disk to test")
	}
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	sim := simulated(a.cfg.Hardware)
	var burns []*diskBurn
	defer func() {
		for _, b := range burns {
			b.dev.Close()
		}
	}()
	var prior float64
	resumed := false
	for _, bd := range devs {
		dev, err := a.cfg.Hardware.Open(bd)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", bd.Name, err)
		}
		b := &diskBurn{name: bd.Name, dev: dev, limit: dev.Size() - diskReserve}
		burns = append(burns, b)
		if b.limit < burnChunk/4 {
			return nil, fmt.Errorf("burnin_disk: %s is too small (%d bytes)", bd.Name, dev.Size())
		}
		if sim {
			b.limit = min(b.limit, simDiskRange)
		}
		if cp, ok := readDiskCheckpoint(dev); ok && cp.Loops == loops && cp.Runtime == runtimeSec && cp.End <= b.limit {
			b.cp = cp
			prior = max(prior, cp.Elapsed)
			resumed = true
			a.log.Info("burnin_disk resumes from its checkpoint", "disk", bd.Name, "pass", cp.Pass, "verify", cp.Verify, "offset", cp.Offset)
		} else {
			b.cp = diskCheckpoint{Magic: checkpointMagic, Seed: binary.LittleEndian.Uint64(seed[:]), Runtime: runtimeSec, Loops: loops, Size: dev.Size()}
		}
	}
	clock := burnClock{start: time.Now(), total: time.Duration(runtimeSec) * time.Second, prior: time.Duration(prior * float64(time.Second))}
	timed := runtimeSec > 0
	publish := func() {
		var written, read, errs, pass int64
		for _, b := range burns {
			c := b.snapshot()
			written, read, errs, pass = written+c.Written, read+c.Read, errs+c.Errors, max(pass, c.Pass)
		}
		// A loops burn-in's fraction is the bytes done, not the time.
		frac := clock.fraction()
		if !timed {
			var done, all float64
			for _, b := range burns {
				c := b.snapshot()
				all += float64(2 * loops * b.limit)
				done += float64(2*c.Pass*b.limit + c.Offset)
				if c.Verify {
					done += float64(b.limit)
				}
			}
			frac = min(done/all, 1)
		}
		p := map[string]any{"passes": float64(pass), "errors": float64(errs), "bytes_written": float64(written), "bytes_read": float64(read)}
		a.publishBurnin(cmd, "burnin_disk", fmt.Sprintf("burnin_disk: %d disks, pass %d", len(burns), pass+1), clock, frac, p)
	}
	stop := ticker(ctx, progressEvery, publish)
	defer stop()
	var wg sync.WaitGroup
	errc := make([]error, len(burns))
	for i, b := range burns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc[i] = b.run(ctx, clock, loops, timed)
		}()
	}
	wg.Wait()
	stop()
	if err := errors.Join(errc...); err != nil {
		return nil, fmt.Errorf("burnin_disk: %w", err)
	}
	publish()
	disks := map[string]any{}
	var errs int64
	for _, b := range burns {
		c := b.snapshot()
		errs += c.Errors
		disks[b.name] = map[string]any{"passes": c.Pass, "errors": c.Errors, "bytes_written": c.Written, "bytes_read": c.Read,
			"bytes_per_second": float64(c.Written+c.Read) / max(clock.elapsed().Seconds(), 1e-9)}
		if err := clearDiskCheckpoint(b.dev); err != nil {
			return nil, fmt.Errorf("burnin_disk %s: %w", b.name, err)
		}
	}
	res := map[string]any{"disks": disks, "errors": errs, "seconds": clock.elapsed().Seconds(), "resumed": resumed}
	a.log.Info("burnin_disk finished", "node", a.NodeUUID(), "result", res)
	if errs > 0 {
		return nil, fmt.Errorf("burnin_disk: %d sectors read back wrong", errs)
	}
	return res, nil
}
