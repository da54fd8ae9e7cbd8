package agent

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/ironflow/ironflow/agent/client"
)

// errNoSecureErase says a device has no secure erase of the kind asked
// (not an NVMe or ATA device, or one without the feature): the caller
// falls back to shredding, as IPA's erase_block_device does.
var errNoSecureErase = errors.New("secure erase not supported")

// Simulator is implemented by simulated hardware (agent/sim): steps whose
// work is the load itself (burn-ins) or whose bytes the simulation drops
// (shred's random passes) do a token amount of it there, so that many
// simulated agents do not load the test machine.
type Simulator interface{ Simulated() bool }

func simulated(hw Hardware) bool {
	s, ok := hw.(Simulator)
	return ok && s.Simulated()
}

// HardwareZeroer is implemented by devices that zero a range themselves
// (a WRITE ZEROES command or a discard that guarantees zeros), without the
// host sending the bytes; erase_devices_express uses it.
type HardwareZeroer interface {
	// ZeroesInHardware reports whether ZeroRange is done by the device
	// (false: the kernel would write the zeros itself, which is no
	// faster than shredding).
	ZeroesInHardware() bool
	ZeroRange(off, n int64) error
}

// eraseOptions are erase_devices' choices, IPA's [DEFAULT] options.
type eraseOptions struct {
	ATA, NVMe, ContinueOnFailure bool
	Iterations                   int64
	Zeros                        bool
}

func parseEraseOptions(args, node map[string]any) (eraseOptions, error) {
	s := newStepArgs(args, node)
	o := eraseOptions{
		ATA:               s.boolean("enable_ata_secure_erase", "agent_enable_ata_secure_erase", true),
		NVMe:              s.boolean("enable_nvme_secure_erase", "agent_enable_nvme_secure_erase", true),
		ContinueOnFailure: s.boolean("continue_if_secure_erase_failed", "agent_continue_if_secure_erase_failed", false),
		Iterations:        s.integer("shred_random_overwrite_iterations", "agent_erase_devices_iterations", 1),
		Zeros:             s.boolean("shred_final_overwrite_with_zeros", "agent_erase_devices_zeroize", true),
	}
	if s.err != nil {
		return o, s.err
	}
	if o.Iterations == 0 && !o.Zeros {
		return o, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters",
			"shred_random_overwrite_iterations is 0 and shred_final_overwrite_with_zeros is false: a disk without secure erase would not be erased")
	}
	return o, nil
}

// eraseDevices is erase_devices: per disk NVMe secure erase or ATA security
// erase where the device supports it, else shred (random passes, then
// zeros), publishing progress. The result maps each disk to its method.
func (a *Agent) eraseDevices(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	opts, err := parseEraseOptions(args, node)
	if err != nil {
		return nil, err
	}
	devs, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	passes := opts.Iterations
	if opts.Zeros {
		passes++
	}
	var total, doneBytes int64
	for _, d := range devs {
		total += d.Size * passes
	}
	methods := map[string]string{}
	for _, bd := range devs {
		dev, err := a.cfg.Hardware.Open(bd)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", bd.Name, err)
		}
		method, err := a.eraseDevice(ctx, bd, dev, opts, func(n int64) {
			cmd.SetResult(map[string]any{"progress": client.Progress{BytesWritten: doneBytes + n, TotalBytes: total, Stage: "erasing " + bd.Name}})
		})
		dev.Close()
		if err != nil {
			return nil, fmt.Errorf("erase %s: %w", bd.Name, err)
		}
		doneBytes += bd.Size * passes
		methods[bd.Name] = method
		a.log.Info("erased disk", "node", a.NodeUUID(), "disk", bd.Name, "method", method)
	}
	return map[string]any{"erased": methods}, nil
}

// eraseDevice erases one disk: secure erase first where enabled and
// supported, shred otherwise. A secure erase that fails (rather than
// being unsupported) fails the step unless ContinueOnFailure, as IPA's
// agent_continue_if_secure_erase_failed.
func (a *Agent) eraseDevice(ctx context.Context, bd BlockDevice, dev Device, o eraseOptions, progress func(int64)) (string, error) {
	try := func(enabled bool, erase func(Device, bool) (string, error)) (string, bool, error) {
		if !enabled {
			return "", false, nil
		}
		m, err := erase(dev, false)
		switch {
		case err == nil:
			return m, true, nil
		case errors.Is(err, errNoSecureErase):
			return "", false, nil
		case o.ContinueOnFailure:
			a.log.Warn("secure erase failed, shredding instead", "disk", bd.Name, "err", err)
			return "", false, nil
		}
		return "", false, err
	}
	if m, ok, err := try(o.NVMe, nvmeSecureErase); ok || err != nil {
		return m, err
	}
	if m, ok, err := try(o.ATA, ataSecureErase); ok || err != nil {
		return m, err
	}
	return shred(ctx, dev, o.Iterations, o.Zeros, simulated(a.cfg.Hardware), progress)
}

// shredChunk is what shred writes at a time.
const shredChunk = 4 << 20

// shred overwrites the whole device with iterations passes of random data
// and, with zeros, a last pass of zeros, as shred(1) --iterations --zero
// does for IPA. Random bytes come from ChaCha8 keyed from crypto/rand:
// unpredictable, and fast enough not to be the bottleneck of a disk.
// cheap (simulated disks, which drop the bytes) reuses one random buffer.
func shred(ctx context.Context, dev Device, iterations int64, zeros, cheap bool, progress func(int64)) (string, error) {
	size := dev.Size()
	buf := alignedBuffer(shredChunk)
	var done int64
	for pass := int64(0); pass < iterations; pass++ {
		var seed [32]byte
		if _, err := crand.Read(seed[:]); err != nil {
			return "", fmt.Errorf("random seed: %w", err)
		}
		rng := rand.NewChaCha8(seed)
		if cheap {
			_, _ = rng.Read(buf)
		}
		for off := int64(0); off < size; off += shredChunk {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			n := min(int64(shredChunk), size-off)
			if !cheap {
				_, _ = rng.Read(buf[:n])
			}
			if _, err := dev.WriteAt(buf[:n], off); err != nil {
				return "", fmt.Errorf("random pass %d at %d: %w", pass+1, off, err)
			}
			done += n
			progress(done)
		}
		if err := dev.Sync(); err != nil {
			return "", fmt.Errorf("sync after random pass %d: %w", pass+1, err)
		}
	}
	if zeros {
		clear(buf)
		for off := int64(0); off < size; off += shredChunk {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			n := min(int64(shredChunk), size-off)
			if !zeroRange(dev, off, n) {
				if _, err := dev.WriteAt(buf[:n], off); err != nil {
					return "", fmt.Errorf("zero pass at %d: %w", off, err)
				}
			}
			done += n
			progress(done)
		}
		if err := dev.Sync(); err != nil {
			return "", fmt.Errorf("sync after zero pass: %w", err)
		}
	}
	return "shred", nil
}

// hardwareZeroChunk bounds one ZeroRange call so that progress moves and
// an abort is seen between calls.
const hardwareZeroChunk = 1 << 30

// eraseDevicesExpress is erase_devices_express: per disk the fastest erase
// the hardware does itself — NVMe Format with (crypto) secure erase, or
// zeroing by the device (WRITE ZEROES / a discard that reads back zeros)
// — and the metadata erase where there is neither. The result maps each
// disk to its method.
func (a *Agent) eraseDevicesExpress(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	nvme := s.boolean("enable_nvme_secure_erase", "agent_enable_nvme_secure_erase", true)
	if s.err != nil {
		return nil, s.err
	}
	devs, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	methods := map[string]string{}
	var errs []error
	for _, bd := range devs {
		dev, err := a.cfg.Hardware.Open(bd)
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", bd.Name, err))
			continue
		}
		method, err := expressErase(ctx, dev, nvme, func(n int64) {
			cmd.SetResult(map[string]any{"progress": client.Progress{BytesWritten: n, TotalBytes: bd.Size, Stage: "erasing " + bd.Name}})
		})
		dev.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("erase %s: %w", bd.Name, err))
			continue
		}
		methods[bd.Name] = method
		a.log.Info("erased disk", "node", a.NodeUUID(), "disk", bd.Name, "method", method)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return map[string]any{"erased": methods}, nil
}

func expressErase(ctx context.Context, dev Device, nvme bool, progress func(int64)) (string, error) {
	if nvme {
		m, err := nvmeSecureErase(dev, true)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, errNoSecureErase) {
			return "", err
		}
	}
	if z, ok := dev.(HardwareZeroer); ok && z.ZeroesInHardware() {
		size := dev.Size()
		for off := int64(0); off < size; off += hardwareZeroChunk {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			n := min(int64(hardwareZeroChunk), size-off)
			if err := z.ZeroRange(off, n); err != nil {
				return "", fmt.Errorf("zero in hardware at %d: %w", off, err)
			}
			progress(off + n)
		}
		return "write_zeroes", dev.Sync()
	}
	if err := eraseMetadata(dev); err != nil {
		return "", fmt.Errorf("erase metadata: %w", err)
	}
	return "metadata", dev.Sync()
}
