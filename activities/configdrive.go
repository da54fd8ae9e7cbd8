package activities

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// maxConfigDrive is Ironic's limit on a config drive: 64 MiB.
const maxConfigDrive = 64 << 20

// configDriveValue validates the configdrive of a deploy request and returns
// what instance_info keeps: a URL or a gzip+base64 ISO as given, or for a
// JSON dict (API 1.56) the config-2 ISO ironflow builds from it.
func configDriveValue(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		iso, err := buildConfigDriveISO(raw)
		if err != nil {
			return "", err
		}
		return encodeConfigDrive(iso)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("configdrive must be a string (gzip+base64 ISO or URL) or a JSON object with meta_data, user_data, network_data, vendor_data")
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		if _, err := url.Parse(s); err != nil {
			return "", fmt.Errorf("configdrive URL: %w", err)
		}
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("configdrive is neither a URL nor base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("configdrive is base64 but not gzip: %w", err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, maxConfigDrive+1))
	if err != nil {
		return "", fmt.Errorf("configdrive gzip stream: %w", err)
	}
	if n > maxConfigDrive {
		return "", fmt.Errorf("configdrive is larger than %d MiB", maxConfigDrive>>20)
	}
	return s, nil
}

func encodeConfigDrive(iso []byte) (string, error) {
	if len(iso) > maxConfigDrive {
		return "", fmt.Errorf("configdrive is larger than %d MiB", maxConfigDrive>>20)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(iso); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
