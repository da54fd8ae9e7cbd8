package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// benchQcow2 writes one disk image three ways into a file "disk" in the
// same run: the agent streaming the qcow2 file (package qcow2), the agent
// streaming the raw file, and what Ironic's agent does with a qcow2 image,
// curl into a temporary file on the same disk, then qemu-img convert -O raw
// (with the sha256 of the downloaded file checked in between). The disk
// is half random data, a quarter text, a quarter holes, as a used disk is;
// the qcow2 file is qemu-img convert -O qcow2's (uncompressed: the
// comparison is of the disk path; compression would add inflate time to
// both sides).
func benchQcow2(ctx context.Context, cfg config, st *stack, dir string, log *slog.Logger) ([]Row, error) {
	size := int64(cfg.imageMiB) << 20
	srcDir := filepath.Join(dir, "qcow2-images")
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(srcDir)
	raw, img := filepath.Join(srcDir, "disk.raw"), filepath.Join(srcDir, "disk.qcow2")
	if err := writeUsedDisk(raw, size); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, img).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img convert -O qcow2: %w: %s", err, out)
	}
	rawSum, err := sha256File(raw)
	if err != nil {
		return nil, err
	}
	imgSum, err := sha256File(img)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(srcDir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	log.Info("qcow2 bench images ready", "virtual_bytes", size)

	disk := filepath.Join(dir, "disk.img")
	qTook, qHWM, _, _, err := agentWrite(ctx, cfg, st, imageSource{URL: base + "/disk.qcow2", SHA256: imgSum, Format: "qcow2"}, disk, size, log)
	if err != nil {
		return nil, fmt.Errorf("agent qcow2 write: %w", err)
	}
	rTook, rHWM, _, _, err := agentWrite(ctx, cfg, st, imageSource{URL: base + "/disk.raw", SHA256: rawSum, Format: "raw"}, disk, size, log)
	if err != nil {
		return nil, fmt.Errorf("agent raw write: %w", err)
	}
	cTook, cHWM, err := curlQemuImg(ctx, base+"/disk.qcow2", disk, imgSum)
	if err != nil {
		return nil, err
	}
	// Memory depends on the virtual size (the tables), not on the data: a
	// 10 GiB disk with 1 MiB of data every 32 MiB shows the bound.
	bigRaw, bigImg := filepath.Join(srcDir, "big.raw"), filepath.Join(srcDir, "big.qcow2")
	if err := writeSparseDisk(bigRaw, qcow2BigDisk); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", bigRaw, bigImg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img convert -O qcow2: %w: %s", err, out)
	}
	_ = os.Remove(bigRaw)
	bigSum, err := sha256File(bigImg)
	if err != nil {
		return nil, err
	}
	bTook, bHWM, _, _, err := agentWrite(ctx, cfg, st, imageSource{URL: base + "/big.qcow2", SHA256: bigSum, Format: "qcow2"}, disk, qcow2BigDisk, log)
	if err != nil {
		return nil, fmt.Errorf("agent qcow2 write of the 10 GiB disk: %w", err)
	}

	rate := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	label := fmt.Sprintf("%d MiB disk, local HTTP into a file, virtual MiB/s", cfg.imageMiB)
	return []Row{
		row("qcow2", "agent peak RSS writing a 10 GiB qcow2 disk (1 MiB of data per 32 MiB, VmHWM)", mib(bHWM), "MiB").
			note(fmt.Sprintf("written in %.1f s; the bound is the configuration's (package qcow2), not the image's size", bTook.Seconds())),
		row("qcow2", "agent write_image of a qcow2 image, streamed ("+label+")", rate(qTook), "MiB/s").
			vs("curl -o TMP.qcow2 (same disk), sha256 checked, qemu-img convert -O raw TMP.qcow2 FILE, sync", rate(cTook)).
			note("the agent converts as it downloads, with the qcow2 file's sha256 in the same pass; Ironic's agent downloads the whole file first"),
		row("qcow2", "agent write_image of the qcow2 image against the raw image of the same disk ("+label+")", rate(qTook), "MiB/s").
			vs("agent write_image of the raw image", rate(rTook)),
		row("qcow2", "agent peak RSS writing the qcow2 image (VmHWM)", mib(qHWM), "MiB").
			vs("agent peak RSS writing the raw image", mib(rHWM)),
		row("qcow2", "agent peak RSS writing the qcow2 image against curl + qemu-img (largest process)", mib(qHWM), "MiB").
			vs("curl, openssl, qemu-img convert: largest peak RSS (ru_maxrss)", mib(cHWM)),
	}, nil
}

// curlQemuImg is Ironic's agent's way: the whole qcow2 file downloaded to
// a temporary file beside the target, checked, converted, synced.
func curlQemuImg(ctx context.Context, url, disk, sum string) (time.Duration, int64, error) {
	_ = os.Remove(disk)
	defer os.Remove(disk)
	tmp := disk + ".download.qcow2"
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(ctx, imageWriteTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-c", `set -e -o pipefail
curl -sf "$1" -o "$3"
read -r got _ < <(openssl dgst -sha256 -r "$3")
[ "$got" = "$4" ]
qemu-img convert -f qcow2 -O raw "$3" "$2"
rm -f "$3"
sync -f "$2"`, "bash", url, disk, tmp, sum)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("curl + qemu-img convert: %w: %s", err, out)
	}
	took := time.Since(start)
	var hwm int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		hwm = ru.Maxrss * 1024 // wait4's usage includes the shell's children
	}
	return took, hwm, nil
}

// qcow2BigDisk is the virtual size of the memory-bound measurement.
const qcow2BigDisk = 10 << 30

// writeSparseDisk writes a sparse raw disk of size bytes with 1 MiB of
// random data every 32 MiB.
func writeSparseDisk(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	rnd := make([]byte, 1<<20)
	for off := int64(0); off+int64(len(rnd)) <= size; off += 32 << 20 {
		_, _ = crand.Read(rnd)
		if _, err := f.WriteAt(rnd, off); err != nil {
			return err
		}
	}
	return nil
}

// writeUsedDisk writes a raw disk of size bytes: per 4 MiB, 2 MiB random,
// 1 MiB text, 1 MiB hole.
func writeUsedDisk(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	rnd := make([]byte, 2<<20)
	text := make([]byte, 1<<20)
	for i := range text {
		text[i] = "ironflow streams qcow2 images to disk\n"[i%38]
	}
	for off := int64(0); off < size; off += 4 << 20 {
		_, _ = crand.Read(rnd)
		n := min(int64(len(rnd)), size-off)
		if _, err := f.WriteAt(rnd[:n], off); err != nil {
			return err
		}
		if off+int64(len(rnd)) < size {
			m := min(int64(len(text)), size-off-int64(len(rnd)))
			if _, err := f.WriteAt(text[:m], off+int64(len(rnd))); err != nil {
				return err
			}
		}
	}
	return nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
