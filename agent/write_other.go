//go:build !linux

package agent

import "io"

// diskWriter writes an image's chunks to a disk; only Linux has the
// O_DIRECT and writeback steering of write_linux.go.
type diskWriter struct{ dev io.WriterAt }

func newDiskWriter(dev io.WriterAt, _ int) *diskWriter { return &diskWriter{dev: dev} }

func (w *diskWriter) writeAt(b []byte, off int64) error {
	_, err := w.dev.WriteAt(b, off)
	return err
}

func (w *diskWriter) finish() {}
