package vbmc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"syscall"
	"time"
)

// Limits of a virtual media download.
const (
	// DefaultMediaDownloadTimeout bounds one InsertMedia download.
	DefaultMediaDownloadTimeout = 10 * time.Minute
	// DefaultMaxMediaBytes caps the size of an image, so that a wrong URL
	// cannot fill the state directory.
	DefaultMaxMediaBytes = 8 << 30
)

// errMediaURL marks an image URL the BMC refuses to fetch.
var errMediaURL = errors.New("image URL not allowed")

// InsertMedia downloads the image (as a real BMC does) and puts it into the
// VM's CD drive. Only http(s) URLs whose address is loopback or in
// media_networks are fetched: the address is checked on the connection
// itself, so a name that resolves elsewhere is refused too.
func (m *Machine) InsertMedia(ctx context.Context, image string) error {
	u, err := url.Parse(image)
	if err != nil {
		return fmt.Errorf("%w: %v", errMediaURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q is not http or https", errMediaURL, u.Scheme)
	}
	if err := os.MkdirAll(m.mediaDir(), 0o755); err != nil {
		return fmt.Errorf("create media dir of %s: %w", m.vm.Name, err)
	}
	f, err := os.CreateTemp(m.mediaDir(), "cd-*.iso")
	if err != nil {
		return fmt.Errorf("create media file of %s: %w", m.vm.Name, err)
	}
	path := f.Name()
	keep := false
	defer func() {
		if !keep {
			_ = os.Remove(path)
		}
	}()
	start := time.Now()
	n, err := m.download(ctx, u, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	m.log.Info("virtual media downloaded", "image", image, "bytes", n, "seconds", time.Since(start).Seconds())
	if err := m.attachMedia(ctx, image, path); err != nil {
		return err
	}
	keep = true
	return nil
}

func (m *Machine) download(ctx context.Context, u *url.URL, w io.Writer) (int64, error) {
	dialer := &net.Dialer{
		Timeout: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			return m.cfg.checkMediaAddress(address)
		},
	}
	client := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil},
		Timeout:   DefaultMediaDownloadTimeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errMediaURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("download %s: HTTP %s", u.Redacted(), resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, DefaultMaxMediaBytes+1))
	if err != nil {
		return n, fmt.Errorf("download %s: %w", u.Redacted(), err)
	}
	if n > DefaultMaxMediaBytes {
		return n, fmt.Errorf("download %s: image larger than %d bytes", u.Redacted(), int64(DefaultMaxMediaBytes))
	}
	return n, nil
}

// checkMediaAddress allows loopback and the configured lab networks.
func (c *Config) checkMediaAddress(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%w: %v", errMediaURL, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %v", errMediaURL, err)
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return nil
	}
	for _, p := range c.mediaNets {
		if p.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is neither loopback nor in media_networks", errMediaURL, ip)
}
