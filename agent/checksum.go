package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"  //nolint:gosec // Ironic still accepts md5 image checksums
	"crypto/sha1" //nolint:gosec // Glance os_hash_algo may be sha1
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// maxChecksumFile caps a downloaded checksums file (SHA256SUMS of a whole
// release directory is a few KiB).
const maxChecksumFile = 16 << 20

// expectedChecksum is the algorithm and hex digest an image must match.
type expectedChecksum struct {
	Algo  string
	Value string
	// Source says where the value came from, for error messages.
	Source string
}

func newHash(algo string) (hash.Hash, error) {
	switch algo {
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	case "sha384":
		return sha512.New384(), nil
	case "sha1":
		return sha1.New(), nil //nolint:gosec // see import
	case "md5":
		return md5.New(), nil //nolint:gosec // see import
	}
	return nil, fmt.Errorf("unsupported checksum algorithm %q (supported: sha256, sha384, sha512, sha1, md5)", algo)
}

// algoForLength picks the algorithm of a bare hex digest by its length, by
// Ironic's rule.
func algoForLength(v string) (string, error) {
	switch len(v) {
	case 128:
		return "sha512", nil
	case 96:
		return "sha384", nil
	case 64:
		return "sha256", nil
	case 32:
		return "md5", nil
	}
	return "", fmt.Errorf("checksum %q is not a sha512, sha256 or md5 hex digest (length %d)", v, len(v))
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// resolveChecksum turns the image's checksum parameters into an algorithm
// and digest: os_hash_algo+os_hash_value first, then checksum as a URL to a
// checksums file or a bare digest.
func resolveChecksum(ctx context.Context, hc *http.Client, p imageParams, cfg DownloadConfig) (expectedChecksum, error) {
	allowMD5 := !cfg.DisallowMD5
	var ck expectedChecksum
	switch {
	case p.HashAlgo != "" && p.HashValue != "":
		ck = expectedChecksum{Algo: strings.ToLower(p.HashAlgo), Value: strings.ToLower(strings.TrimSpace(p.HashValue)), Source: "os_hash_value"}
		if _, err := newHash(ck.Algo); err != nil {
			return ck, err
		}
	case strings.HasPrefix(p.Checksum, "http://") || strings.HasPrefix(p.Checksum, "https://"):
		v, err := fetchChecksum(ctx, hc, p.Checksum, p.URL, cfg)
		if err != nil {
			return ck, err
		}
		algo, err := algoForLength(v)
		if err != nil {
			return ck, fmt.Errorf("checksum file %s: %w", redactURL(p.Checksum), err)
		}
		ck = expectedChecksum{Algo: algo, Value: strings.ToLower(v), Source: "checksum file " + redactURL(p.Checksum)}
	case p.Checksum != "":
		v := strings.TrimSpace(p.Checksum)
		// Glance-style "sha256:<hex>" is seen in the wild too.
		if a, rest, ok := strings.Cut(v, ":"); ok && isHex(rest) {
			if _, err := newHash(strings.ToLower(a)); err == nil {
				return expectedChecksum{Algo: strings.ToLower(a), Value: strings.ToLower(rest), Source: "checksum"}, nil
			}
		}
		algo, err := algoForLength(v)
		if err != nil {
			return ck, err
		}
		ck = expectedChecksum{Algo: algo, Value: strings.ToLower(v), Source: "checksum"}
	default:
		return ck, fmt.Errorf("image %s has no checksum (set os_hash_algo+os_hash_value or checksum)", redactURL(p.URL))
	}
	if !isHex(ck.Value) {
		return ck, fmt.Errorf("%s %q is not a hex digest", ck.Source, ck.Value)
	}
	if ck.Algo == "md5" && !allowMD5 {
		return ck, fmt.Errorf("md5 image checksums are disabled on this agent")
	}
	return ck, nil
}

// fetchChecksum downloads a checksums file and returns the digest for the
// image's file name ("<hex>  name", "<hex> *name", or BSD "ALGO (name) =
// <hex>"), or the file's only digest when it holds nothing else. It is
// fetched as the image is, retrying a broken connection or a 5xx: the
// image cache answers only once its image is ready (downloaded, and with
// force_raw_images converted), which may take longer than a response
// header timeout.
func fetchChecksum(ctx context.Context, hc *http.Client, checksumURL, imageURL string, cfg DownloadConfig) (string, error) {
	rr := newResumableReader(ctx, hc, checksumURL, cfg.withDefaults())
	defer rr.Close()
	data, err := io.ReadAll(io.LimitReader(rr, maxChecksumFile))
	if err != nil {
		var perm permanentError
		if errors.As(err, &perm) {
			// The reader's own words (download <url>: HTTP 404, or the
			// certificate hint), as a checksum file's.
			return "", fmt.Errorf("checksum file: %w", err)
		}
		return "", fmt.Errorf("download checksum file %s: %w", redactURL(checksumURL), err)
	}
	return parseChecksumFile(bytes.NewReader(data), imageFileName(imageURL), redactURL(checksumURL))
}

func imageFileName(imageURL string) string {
	u, err := url.Parse(imageURL)
	if err != nil {
		return path.Base(imageURL)
	}
	return path.Base(u.Path)
}

func parseChecksumFile(r io.Reader, name, source string) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var lines [][]string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		lines = append(lines, f)
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read checksum file %s: %w", source, err)
	}
	if len(lines) == 1 && len(lines[0]) == 1 && isHex(lines[0][0]) {
		return lines[0][0], nil
	}
	for _, f := range lines {
		// BSD style: SHA256 (name) = hex
		if len(f) == 4 && f[2] == "=" && strings.HasPrefix(f[1], "(") && strings.HasSuffix(f[1], ")") {
			if cleanName(strings.Trim(f[1], "()")) == name && isHex(f[3]) {
				return f[3], nil
			}
			continue
		}
		if len(f) >= 2 && isHex(f[0]) && cleanName(strings.Join(f[1:], " ")) == name {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("checksum file %s has no entry for %q", source, name)
}

func cleanName(s string) string {
	s = strings.TrimPrefix(s, "*")
	s = strings.TrimPrefix(s, "./")
	return path.Base(s)
}

// redactURL drops user info and query (which may hold temp-URL signatures)
// from URLs shown in logs and errors.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparseable URL>"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "..."
	}
	return u.String()
}
