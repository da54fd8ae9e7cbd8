package imagecache

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ironflow/ironflow/hardware"
)

// MaxCABundle bounds the CA bundle of image_verify_ca: it is sent to the
// agent with the image-write command, and a real bundle (the whole Mozilla
// store is about 200 KiB) is far smaller.
const MaxCABundle = 1 << 20

// ErrUntrusted wraps a failed download whose server's certificate is not
// trusted by the node's image_verify_ca; retrying will not help.
var ErrUntrusted = errors.New("the image server's certificate is not trusted")

// Trust is how a node's image server is verified (driver_info
// image_verify_ca): the system store (the zero value), no verification, or
// the CA bundle's PEM content.
type Trust struct {
	Skip  bool
	CAPEM []byte
	// Path is where the bundle was read, for messages.
	Path string
}

// TrustOf reads driver_info/image_verify_ca the way Ironic reads its
// *_verify_ca options: a boolean (or its word, "True", "false", "0" ...)
// or the path of a CA bundle file, read here, on the conductor, so that
// the agent gets its content rather than a path its ramdisk lacks.
func TrustOf(driverInfo map[string]any) (Trust, error) {
	v, ok := driverInfo[hardware.KeyImageVerifyCA]
	if !ok || v == nil {
		return Trust{}, nil
	}
	if b, ok := v.(bool); ok {
		return Trust{Skip: !b}, nil
	}
	s, ok := v.(string)
	if !ok {
		return Trust{}, fmt.Errorf("driver_info/%s %v is neither a boolean nor the path of a CA bundle file", hardware.KeyImageVerifyCA, v)
	}
	s = strings.TrimSpace(s)
	if b, ok := boolWord(s); ok {
		return Trust{Skip: !b}, nil
	}
	f, err := os.Open(s)
	if err != nil {
		return Trust{}, fmt.Errorf("driver_info/%s %q is neither a boolean nor a readable CA bundle file on the conductor: %w", hardware.KeyImageVerifyCA, s, err)
	}
	defer f.Close()
	pem, err := io.ReadAll(io.LimitReader(f, MaxCABundle+1))
	if err != nil {
		return Trust{}, fmt.Errorf("driver_info/%s %q: %w", hardware.KeyImageVerifyCA, s, err)
	}
	if len(pem) > MaxCABundle {
		return Trust{}, fmt.Errorf("driver_info/%s %q is larger than %d bytes: give a bundle of the CAs that sign the image servers only", hardware.KeyImageVerifyCA, s, MaxCABundle)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return Trust{}, fmt.Errorf("driver_info/%s %q holds no PEM certificate", hardware.KeyImageVerifyCA, s)
	}
	return Trust{CAPEM: pem, Path: s}, nil
}

func boolWord(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1", "y", "t":
		return true, true
	case "false", "no", "off", "0", "n", "f":
		return false, true
	}
	return false, false
}

// AgentArg is the value of write_image's image_verify_ca argument: absent
// (nil) for the system store, false, or the bundle's PEM text.
func (t Trust) AgentArg() any {
	switch {
	case t.Skip:
		return false
	case t.CAPEM != nil:
		return string(t.CAPEM)
	}
	return nil
}

// Fingerprint tells two trust settings apart (a download that failed on
// one node's trust is tried again with another's).
func (t Trust) Fingerprint() string {
	switch {
	case t.Skip:
		return "skip"
	case t.CAPEM != nil:
		return "ca:" + string(t.CAPEM)
	}
	return ""
}

// Client is an HTTP client for the image cache's downloads from the
// origin with this trust. Images are fetched as served: no transparent
// decompression (the checksum is of the file).
func (t Trust) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 60 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = 60 * time.Second
	tr.DisableCompression = true
	// HTTP/1.1 to every origin: a download is one long stream on a
	// connection of its own, which HTTP/2's framing and flow control
	// slow down (docs/oci-images.md, "Speed").
	tr.ForceAttemptHTTP2 = false
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	switch {
	case t.Skip:
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the operator set image_verify_ca=False
	case t.CAPEM != nil:
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(t.CAPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	case tr.TLSClientConfig != nil:
		// The clone of a default transport that has run offers h2 in ALPN.
		tr.TLSClientConfig.NextProtos = nil
	}
	return &http.Client{Transport: tr}
}

// IsUntrusted reports whether err is a TLS certificate verification
// failure (unknown authority, wrong host name, expired).
func IsUntrusted(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// untrustedError words a certificate failure with the setting to change.
func untrustedError(err error) error {
	return fmt.Errorf("%w (set driver_info/%s to the path of its CA bundle on the conductor, or False): %v", ErrUntrusted, hardware.KeyImageVerifyCA, err)
}
