package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// certValidity is how long the agent's self-signed certificate lasts: far
// longer than any ramdisk lives, with slack for a skewed clock before NTP.
const certValidity = 30 * 24 * time.Hour

// selfSignedCert creates the command API's certificate for the address the
// agent advertises; its PEM goes to the API as agent_verify_ca so the control
// plane can pin it (as IPA's auto-TLS does).
func selfSignedCert(host string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host, Organization: []string{"ironflow agent"}},
		NotBefore:             now.Add(-24 * time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("encode TLS key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load generated certificate: %w", err)
	}
	return cert, certPEM, nil
}

// imageVerifyCAArg is write_image's argument saying how the image server's
// certificate is verified (the node's driver_info/image_verify_ca as the
// conductor resolved it): absent or true, the system's trusted CAs; false,
// no verification; otherwise the PEM text of the CA bundle (the conductor
// sends the content: the bundle's path exists on the conductor only).
const imageVerifyCAArg = "image_verify_ca"

// maxCABundle bounds the bundle accepted in a command (the conductor
// refuses larger ones first).
const maxCABundle = 1 << 20

// imageClient is the download client for one write_image command, trusting
// the image server as args say. A client of its own (close it with
// CloseIdleConnections) unless the default trust is asked for.
func (a *Agent) imageClient(args map[string]any, log *slog.Logger) (*http.Client, error) {
	v, ok := args[imageVerifyCAArg]
	if !ok || v == nil {
		return a.cfg.DownloadClient, nil
	}
	var verify = true
	var pemText string
	switch x := v.(type) {
	case bool:
		verify = x
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes", "on", "1", "y", "t":
		case "false", "no", "off", "0", "n", "f":
			verify = false
		default:
			pemText = x
		}
	default:
		return nil, fmt.Errorf("%s must be a boolean or PEM certificates, not %T", imageVerifyCAArg, v)
	}
	if verify && pemText == "" {
		return a.cfg.DownloadClient, nil
	}
	base := a.cfg.DownloadClient
	tr, ok := base.Transport.(*http.Transport)
	if base.Transport == nil {
		tr, ok = http.DefaultTransport.(*http.Transport), true
	}
	if !ok {
		return nil, fmt.Errorf("%s: the agent's download client has a transport whose TLS settings cannot be changed", imageVerifyCAArg)
	}
	tr = tr.Clone()
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		tlsCfg = tr.TLSClientConfig.Clone()
	}
	if !verify {
		log.Warn("image server certificates are not verified (image_verify_ca is False)")
		tlsCfg.InsecureSkipVerify = true //nolint:gosec // the operator set image_verify_ca=False
	} else {
		if len(pemText) > maxCABundle {
			return nil, fmt.Errorf("%s: the CA bundle is %d bytes, more than %d", imageVerifyCAArg, len(pemText), maxCABundle)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(pemText)) {
			return nil, fmt.Errorf("%s is neither a boolean nor PEM certificates", imageVerifyCAArg)
		}
		tlsCfg.RootCAs = pool
		tlsCfg.InsecureSkipVerify = false
	}
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr, Timeout: base.Timeout, CheckRedirect: base.CheckRedirect, Jar: base.Jar}, nil
}

// untrustedCert reports a TLS certificate verification failure.
func untrustedCert(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// untrustedHint is appended to a download error whose server's
// certificate was not trusted: the operator's fix, since retrying cannot
// help.
const untrustedHint = "the image server's certificate is not trusted (set the node's driver_info/image_verify_ca to the path of its CA bundle on the conductor, or False)"
