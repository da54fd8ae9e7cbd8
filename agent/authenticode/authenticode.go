// Package authenticode checks the Authenticode signature of a UEFI PE
// image, as a UEFI firmware with secure boot on does before it starts a
// loader (the UEFI specification's "Secure Boot and Driver Signing"
// chapter; Microsoft's "Windows Authenticode Portable Executable Signature
// Format"): the image's Authenticode digest must equal the one in the
// signature's SpcIndirectDataContent, the signer's signature over the
// authenticated attributes must verify, and the signer's certificate must
// chain to a trusted certificate (the firmware's db). As the firmware does,
// certificate validity dates are not checked.
//
// The agent uses it before the instance's first boot under secure boot
// (docs/security.md, "Secure boot"): a loader that the firmware would
// refuse with "Access Denied" fails the deploy instead, naming the file.
package authenticode

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"debug/pe"
	"embed"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"sort"

	_ "crypto/sha1" // digest algorithms Authenticode signatures use
	_ "crypto/sha256"
	_ "crypto/sha512"
)

// ErrNotSigned: the image carries no Authenticode signature at all.
var ErrNotSigned = errors.New("no Authenticode signature")

// ErrUntrusted: the image is signed, but no signature chains to a trusted
// certificate.
var ErrUntrusted = errors.New("signed by a certificate that does not chain to a trusted one")

//go:embed certs/*.pem
var certFiles embed.FS

// MicrosoftUEFICAs are the certificates that a machine shipped with
// Microsoft's secure boot keys has in db (and OVMF's Microsoft-enrolled
// variables): Microsoft's third-party UEFI CAs (2011 and 2023), which sign
// shim and other vendors' loaders, and the Windows Production PCA 2011. The
// agent trusts them when it cannot read the firmware's own db (it did not
// boot under UEFI, or db is empty because secure boot was off).
func MicrosoftUEFICAs() []*x509.Certificate {
	var out []*x509.Certificate
	entries, _ := certFiles.ReadDir("certs")
	for _, e := range entries {
		b, err := certFiles.ReadFile("certs/" + e.Name())
		if err != nil {
			continue
		}
		for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Signer describes the signature that verified.
type Signer struct {
	Subject string // the signing certificate's subject
	Anchor  string // the trusted certificate it chains to
}

// Verify checks image (a PE/COFF file's bytes) against trusted. It
// returns ErrNotSigned for an unsigned image, ErrUntrusted (wrapped) for
// one whose signatures are valid but chain to no trusted certificate, and
// another error for a malformed or tampered one.
func Verify(image []byte, trusted []*x509.Certificate) (Signer, error) {
	sigs, pf, err := signatures(image)
	if err != nil {
		return Signer{}, err
	}
	if len(sigs) == 0 {
		return Signer{}, ErrNotSigned
	}
	var errs []error
	for _, sd := range sigs {
		for _, s := range nestedAndSelf(sd) {
			signer, err := s.verify(image, pf, trusted)
			if err == nil {
				return signer, nil
			}
			errs = append(errs, err)
		}
	}
	for _, e := range errs {
		if !errors.Is(e, ErrUntrusted) {
			return Signer{}, e
		}
	}
	return Signer{}, errs[0]
}

// peLayout is what the Authenticode digest needs of the PE headers.
type peLayout struct {
	checksumOff int // the optional header's CheckSum field
	certDirOff  int // the certificate table's data directory entry
	certOff     int // the certificate table (file offset)
	certSize    int
	headersSize int
	sections    [][2]int // offset, size of each section's raw data
}

func layout(image []byte) (peLayout, error) {
	f, err := pe.NewFile(bytes.NewReader(image))
	if err != nil {
		return peLayout{}, fmt.Errorf("not a PE image: %w", err)
	}
	defer f.Close()
	if len(image) < 0x40 {
		return peLayout{}, errors.New("not a PE image: too short")
	}
	peOff := int(binary.LittleEndian.Uint32(image[0x3c:]))
	opt := peOff + 4 + 20
	var l peLayout
	l.checksumOff = opt + 64
	var dir pe.DataDirectory
	switch h := f.OptionalHeader.(type) {
	case *pe.OptionalHeader64:
		l.certDirOff = opt + 112 + 4*8
		l.headersSize = int(h.SizeOfHeaders)
		if h.NumberOfRvaAndSizes > 4 {
			dir = h.DataDirectory[4]
		}
	case *pe.OptionalHeader32:
		l.certDirOff = opt + 96 + 4*8
		l.headersSize = int(h.SizeOfHeaders)
		if h.NumberOfRvaAndSizes > 4 {
			dir = h.DataDirectory[4]
		}
	default:
		return peLayout{}, errors.New("not a PE image: no optional header")
	}
	// The security directory's "address" is a file offset, not an RVA.
	l.certOff, l.certSize = int(dir.VirtualAddress), int(dir.Size)
	if l.certDirOff+8 > len(image) || l.headersSize > len(image) || l.certOff+l.certSize > len(image) || l.certOff < 0 {
		return peLayout{}, errors.New("malformed PE image: headers or certificate table beyond the end of the file")
	}
	for _, s := range f.Sections {
		if s.Size == 0 {
			continue
		}
		if int(s.Offset)+int(s.Size) > len(image) {
			return peLayout{}, fmt.Errorf("malformed PE image: section %s beyond the end of the file", s.Name)
		}
		l.sections = append(l.sections, [2]int{int(s.Offset), int(s.Size)})
	}
	sort.Slice(l.sections, func(i, j int) bool { return l.sections[i][0] < l.sections[j][0] })
	return l, nil
}

// digest is the image's Authenticode digest with h: the headers without
// the checksum and the certificate table's directory entry, the sections
// in file order, then what follows them except the certificate table (as
// EDK2's DxeImageVerificationLib computes it).
func (l peLayout) digest(image []byte, h hash.Hash) []byte {
	h.Write(image[:l.checksumOff])
	h.Write(image[l.checksumOff+4 : l.certDirOff])
	h.Write(image[l.certDirOff+8 : l.headersSize])
	end := l.headersSize
	for _, s := range l.sections {
		h.Write(image[s[0] : s[0]+s[1]])
		if s[0]+s[1] > end {
			end = s[0] + s[1]
		}
	}
	tail := len(image) - l.certSize
	if end < tail {
		h.Write(image[end:tail])
	}
	return h.Sum(nil)
}

// signatures returns the PKCS#7 SignedData blobs of the certificate table
// (WIN_CERTIFICATE entries of type WIN_CERT_TYPE_PKCS_SIGNED_DATA).
func signatures(image []byte) ([]signedData, peLayout, error) {
	l, err := layout(image)
	if err != nil {
		return nil, l, err
	}
	var out []signedData
	for off := l.certOff; l.certSize > 0 && off+8 <= l.certOff+l.certSize; {
		n := int(binary.LittleEndian.Uint32(image[off:]))
		typ := binary.LittleEndian.Uint16(image[off+6:])
		if n < 8 || off+n > l.certOff+l.certSize {
			return nil, l, errors.New("malformed Authenticode certificate table")
		}
		if typ == 0x0002 {
			sd, err := parseSignedData(image[off+8 : off+n])
			if err != nil {
				return nil, l, fmt.Errorf("malformed Authenticode signature: %w", err)
			}
			out = append(out, sd)
		}
		off += (n + 7) &^ 7
	}
	return out, l, nil
}

var (
	oidSignedData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidMessageDigest       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidNestedSignature     = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 4, 1}
	oidSHA1                = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSHA256              = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384              = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512              = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}
	oidRSAEncryption       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidSHA256WithRSA       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	oidECDSAWithSHA256     = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	oidECDSAWithSHA384     = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}
	oidSHA384WithRSA       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}
	oidSHA512WithRSA       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}
	oidSHA1WithRSA         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}
	errUnsupportedDigest   = errors.New("unsupported digest algorithm")
	errUnsupportedSigAlgo  = errors.New("unsupported signature algorithm")
	errSignatureMismatched = errors.New("the signature does not match the image (tampered after signing)")
)

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"explicit,optional,tag:0"`
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type rawSignedData struct {
	Version          int
	DigestAlgorithms asn1.RawValue
	ContentInfo      contentInfo
	Certificates     asn1.RawValue `asn1:"optional,tag:0"`
	CRLs             asn1.RawValue `asn1:"optional,tag:1"`
	SignerInfos      []signerInfo  `asn1:"set"`
}

type issuerAndSerial struct {
	Issuer asn1.RawValue
	Serial asn1.RawValue
}

type attribute struct {
	Type   asn1.ObjectIdentifier
	Values asn1.RawValue `asn1:"set"`
}

type signerInfo struct {
	Version                   int
	IssuerAndSerial           issuerAndSerial
	DigestAlgorithm           algorithmIdentifier
	AuthenticatedAttributes   asn1.RawValue `asn1:"optional,tag:0"`
	DigestEncryptionAlgorithm algorithmIdentifier
	EncryptedDigest           []byte
	UnauthenticatedAttributes asn1.RawValue `asn1:"optional,tag:1"`
}

// spcIndirectDataContent is Authenticode's signed content: what is signed
// (a PE image) and its digest.
type spcIndirectDataContent struct {
	Data          asn1.RawValue
	MessageDigest struct {
		Algorithm algorithmIdentifier
		Digest    []byte
	}
}

type signedData struct {
	raw     rawSignedData
	content spcIndirectDataContent
	certs   []*x509.Certificate
}

func parseSignedData(der []byte) (signedData, error) {
	var ci contentInfo
	if _, err := asn1.Unmarshal(der, &ci); err != nil {
		return signedData{}, err
	}
	if !ci.ContentType.Equal(oidSignedData) {
		return signedData{}, fmt.Errorf("content type %v is not PKCS#7 signed data", ci.ContentType)
	}
	var sd signedData
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &sd.raw); err != nil {
		return signedData{}, err
	}
	if _, err := asn1.Unmarshal(sd.raw.ContentInfo.Content.Bytes, &sd.content); err != nil {
		return signedData{}, fmt.Errorf("SpcIndirectDataContent: %w", err)
	}
	if len(sd.raw.Certificates.Bytes) > 0 {
		certs, err := x509.ParseCertificates(sd.raw.Certificates.Bytes)
		if err != nil {
			return signedData{}, fmt.Errorf("certificates: %w", err)
		}
		sd.certs = certs
	}
	return sd, nil
}

// nestedAndSelf is sd and the signatures nested in its unauthenticated
// attributes (a dual-signed image, e.g. shim signed by Microsoft's 2011
// and 2023 CAs).
func nestedAndSelf(sd signedData) []signedData {
	out := []signedData{sd}
	for _, si := range sd.raw.SignerInfos {
		if len(si.UnauthenticatedAttributes.Bytes) == 0 {
			continue
		}
		for _, a := range parseAttributes(si.UnauthenticatedAttributes.Bytes) {
			if !a.Type.Equal(oidNestedSignature) {
				continue
			}
			for rest := a.Values.Bytes; len(rest) > 0; {
				var v asn1.RawValue
				r, err := asn1.Unmarshal(rest, &v)
				if err != nil {
					break
				}
				rest = r
				if n, err := parseSignedData(v.FullBytes); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func parseAttributes(b []byte) []attribute {
	var out []attribute
	for len(b) > 0 {
		var a attribute
		rest, err := asn1.Unmarshal(b, &a)
		if err != nil {
			return out
		}
		out = append(out, a)
		b = rest
	}
	return out
}

func hashOf(oid asn1.ObjectIdentifier) (crypto.Hash, error) {
	switch {
	case oid.Equal(oidSHA1):
		return crypto.SHA1, nil
	case oid.Equal(oidSHA256):
		return crypto.SHA256, nil
	case oid.Equal(oidSHA384):
		return crypto.SHA384, nil
	case oid.Equal(oidSHA512):
		return crypto.SHA512, nil
	}
	return 0, fmt.Errorf("%w %v", errUnsupportedDigest, oid)
}

func (sd signedData) verify(image []byte, l peLayout, trusted []*x509.Certificate) (Signer, error) {
	h, err := hashOf(sd.content.MessageDigest.Algorithm.Algorithm)
	if err != nil {
		return Signer{}, err
	}
	if !bytes.Equal(l.digest(image, h.New()), sd.content.MessageDigest.Digest) {
		return Signer{}, errSignatureMismatched
	}
	if len(sd.raw.SignerInfos) != 1 {
		return Signer{}, fmt.Errorf("%d signer infos, Authenticode has exactly one", len(sd.raw.SignerInfos))
	}
	si := sd.raw.SignerInfos[0]
	signer := sd.findSigner(si.IssuerAndSerial)
	if signer == nil {
		return Signer{}, errors.New("the signing certificate is not in the signature")
	}
	if err := si.check(sd.raw.ContentInfo.Content.Bytes, signer); err != nil {
		return Signer{}, err
	}
	anchor, err := chain(signer, sd.certs, trusted)
	if err != nil {
		return Signer{}, err
	}
	return Signer{Subject: signer.Subject.String(), Anchor: anchor.Subject.String()}, nil
}

func (sd signedData) findSigner(id issuerAndSerial) *x509.Certificate {
	for _, c := range sd.certs {
		var serial asn1.RawValue
		if _, err := asn1.Unmarshal(mustMarshal(c.SerialNumber), &serial); err != nil {
			continue
		}
		if bytes.Equal(c.RawIssuer, id.Issuer.FullBytes) && bytes.Equal(serial.Bytes, id.Serial.Bytes) {
			return c
		}
	}
	return nil
}

func mustMarshal(v any) []byte {
	b, _ := asn1.Marshal(v)
	return b
}

// check verifies the signer's signature over the authenticated attributes
// and that their messageDigest is the digest of the SpcIndirectDataContent
// (its contents octets, without the SEQUENCE header, as Authenticode
// specifies).
func (si signerInfo) check(content []byte, signer *x509.Certificate) error {
	h, err := hashOf(si.DigestAlgorithm.Algorithm)
	if err != nil {
		return err
	}
	var seq asn1.RawValue
	if _, err := asn1.Unmarshal(content, &seq); err != nil {
		return err
	}
	if len(si.AuthenticatedAttributes.Bytes) == 0 {
		return errors.New("the signature has no authenticated attributes")
	}
	var md []byte
	for _, a := range parseAttributes(si.AuthenticatedAttributes.Bytes) {
		if a.Type.Equal(oidMessageDigest) {
			var v []byte
			if _, err := asn1.Unmarshal(a.Values.Bytes, &v); err == nil {
				md = v
			}
		}
	}
	d := h.New()
	d.Write(seq.Bytes)
	if md == nil || !bytes.Equal(md, d.Sum(nil)) {
		return errSignatureMismatched
	}
	// The signature covers the attributes DER-encoded as a SET OF.
	signed := append([]byte(nil), si.AuthenticatedAttributes.FullBytes...)
	signed[0] = 0x31
	algo, err := signatureAlgorithm(si.DigestEncryptionAlgorithm.Algorithm, h)
	if err != nil {
		return err
	}
	if err := signer.CheckSignature(algo, signed, si.EncryptedDigest); err != nil {
		return fmt.Errorf("the signature does not verify with its certificate %s: %w", signer.Subject, err)
	}
	return nil
}

func signatureAlgorithm(oid asn1.ObjectIdentifier, h crypto.Hash) (x509.SignatureAlgorithm, error) {
	rsa := map[crypto.Hash]x509.SignatureAlgorithm{crypto.SHA1: x509.SHA1WithRSA, crypto.SHA256: x509.SHA256WithRSA,
		crypto.SHA384: x509.SHA384WithRSA, crypto.SHA512: x509.SHA512WithRSA}
	switch {
	case oid.Equal(oidRSAEncryption):
		if a, ok := rsa[h]; ok {
			return a, nil
		}
	case oid.Equal(oidSHA256WithRSA):
		return x509.SHA256WithRSA, nil
	case oid.Equal(oidSHA384WithRSA):
		return x509.SHA384WithRSA, nil
	case oid.Equal(oidSHA512WithRSA):
		return x509.SHA512WithRSA, nil
	case oid.Equal(oidSHA1WithRSA):
		return x509.SHA1WithRSA, nil
	case oid.Equal(oidECDSAWithSHA256):
		return x509.ECDSAWithSHA256, nil
	case oid.Equal(oidECDSAWithSHA384):
		return x509.ECDSAWithSHA384, nil
	}
	return 0, fmt.Errorf("%w %v", errUnsupportedSigAlgo, oid)
}

// chain walks from leaf through the signature's certificates to a trusted
// one. A trusted certificate may be the leaf itself or any certificate on
// the way (UEFI's db holds CAs and signing certificates alike); dates are
// not checked, as the firmware does not check them.
func chain(leaf *x509.Certificate, pool, trusted []*x509.Certificate) (*x509.Certificate, error) {
	c := leaf
	for depth := 0; depth < 8; depth++ {
		for _, t := range trusted {
			if bytes.Equal(t.Raw, c.Raw) {
				return t, nil
			}
		}
		for _, t := range trusted {
			if bytes.Equal(t.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(t) == nil {
				return t, nil
			}
		}
		var next *x509.Certificate
		for _, p := range pool {
			if p != c && bytes.Equal(p.RawSubject, c.RawIssuer) && !bytes.Equal(p.Raw, c.Raw) && c.CheckSignatureFrom(p) == nil {
				next = p
				break
			}
		}
		if next == nil {
			break
		}
		c = next
	}
	return nil, fmt.Errorf("%w (signer %s, issued by %s)", ErrUntrusted, leaf.Subject, leaf.Issuer)
}

// ShimVendorCertificates returns the certificates shim trusts besides db
// for the loader it starts (GRUB): the one built into its .vendor_cert
// section (shim's cert_table: authorized size, deauthorized size,
// authorized offset, deauthorized offset, then the DER certificate). A
// loader that is not shim has none (nil, nil).
func ShimVendorCertificates(image []byte) ([]*x509.Certificate, error) {
	f, err := pe.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("not a PE image: %w", err)
	}
	defer f.Close()
	s := f.Section(".vendor_cert")
	if s == nil {
		return nil, nil
	}
	b, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("shim's .vendor_cert: %w", err)
	}
	if len(b) < 16 {
		return nil, errors.New("shim's .vendor_cert is too short")
	}
	size, off := int(binary.LittleEndian.Uint32(b[0:])), int(binary.LittleEndian.Uint32(b[8:]))
	if size == 0 {
		return nil, nil
	}
	if off+size > len(b) {
		return nil, errors.New("shim's .vendor_cert points beyond its section")
	}
	c, err := x509.ParseCertificate(b[off : off+size])
	if err != nil {
		return nil, fmt.Errorf("shim's vendor certificate: %w", err)
	}
	return []*x509.Certificate{c}, nil
}
