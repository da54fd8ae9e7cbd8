package activities

import (
	"context"
	"crypto/sha1" //nolint:gosec // Ironic's firmware checksum is SHA-1; it identifies, it does not authenticate.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/workflows"
)

// maxFirmwareDownload bounds the bytes hashed for one image.
const maxFirmwareDownload = 4 << 30

// verifyFirmwareChecksum downloads the component's image and compares its
// digest with the setting's checksum before the BMC is asked to flash it,
// as Ironic's firmware_utils.verify_checksum does with the file it
// downloaded: a BMC given only a URL cannot be told what to expect, so
// the worker checks what the URL serves. A mismatch fails the step with
// Ironic's message; a URL that cannot be read is retried.
func verifyFirmwareChecksum(ctx context.Context, nodeUUID string, s workflows.FirmwareSetting) error {
	// Each message names the component first: the step's last_error is
	// all an operator of a multi-component update (or of a deploy whose
	// template holds the step) has to tell which image failed.
	what := "firmware update of " + s.Component + ": "
	invalid := func(msg string) error {
		return temporal.NewNonRetryableApplicationError(what+msg, workflows.ErrTypeInvalidConfig, nil)
	}
	algo, want, err := workflows.ParseFirmwareChecksum(s.Checksum)
	if err != nil {
		return invalid(err.Error())
	}
	var h hash.Hash
	switch algo {
	case "sha1":
		h = sha1.New() //nolint:gosec // see the import
	case "sha256":
		h = sha256.New()
	default:
		h = sha512.New()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return invalid(fmt.Sprintf("firmware image URL %q: %v", s.URL, err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%sdownload firmware image %s to verify its checksum: %w", what, s.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return invalid(fmt.Sprintf("download firmware image %s to verify its checksum: HTTP %d", s.URL, resp.StatusCode))
	}
	n, err := io.Copy(h, io.LimitReader(resp.Body, maxFirmwareDownload+1))
	if err != nil {
		return fmt.Errorf("%sdownload firmware image %s to verify its checksum: %w", what, s.URL, err)
	}
	if n > maxFirmwareDownload {
		return invalid(fmt.Sprintf("firmware image %s is larger than %d bytes", s.URL, int64(maxFirmwareDownload)))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return invalid(fmt.Sprintf("For node %s firmware file %s checksums do not match. Expected: %s, calculated: %s.", nodeUUID, s.URL, want, got))
	}
	return nil
}
