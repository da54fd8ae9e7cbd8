package pxe

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
)

// EDK2CACerts encodes the PEM certificates in pemData as EDK2 firmware
// (OVMF) takes the CAs that it trusts for HTTPS boot: one
// EFI_SIGNATURE_LIST of type EFI_CERT_X509_GUID per certificate, each
// holding one EFI_SIGNATURE_DATA (owner GUID, DER certificate) (UEFI
// specification, "Signature Database"). QEMU hands the result to OVMF as
// fw_cfg file "etc/edk2/https/cacerts"; p11-kit's edk2-cacerts format is
// the same.
func EDK2CACerts(pemData []byte) ([]byte, error) {
	var out bytes.Buffer
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("EDK2 CA certificates: %w", err)
		}
		const listHeader, ownerSize = 16 + 4 + 4 + 4, 16
		sigSize := ownerSize + len(block.Bytes)
		out.Write(efiCertX509GUID[:])
		binary.Write(&out, binary.LittleEndian, uint32(listHeader+sigSize)) // SignatureListSize
		binary.Write(&out, binary.LittleEndian, uint32(0))                  // SignatureHeaderSize
		binary.Write(&out, binary.LittleEndian, uint32(sigSize))            // SignatureSize
		out.Write(ironflowOwnerGUID[:])
		out.Write(block.Bytes)
	}
	if out.Len() == 0 {
		return nil, errors.New("EDK2 CA certificates: no PEM certificate found")
	}
	return out.Bytes(), nil
}

// efiCertX509GUID is EFI_CERT_X509_GUID, a5c059a1-94e4-4aa7-87b5-ab155c2bf072,
// in the firmware's byte order (the first three fields little-endian).
var efiCertX509GUID = [16]byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}

// ironflowOwnerGUID is the SignatureOwner of the entries ironflow writes:
// no firmware reads it for CA certificates; a fixed, random value.
var ironflowOwnerGUID = [16]byte{0x3c, 0x2d, 0x8a, 0x5e, 0x71, 0x0b, 0x4f, 0x46, 0x9d, 0x5a, 0x21, 0x6e, 0xc4, 0x13, 0x97, 0x0f}

// FirmwareTLSCipherSuites are the TLS 1.2 cipher suites of a boot service
// that UEFI firmware fetches loaders from over HTTPS: Go's defaults (ECDHE
// first, as the server prefers them) and the RSA key exchange suites that
// EDK2 builds whose OpenSSL has no elliptic curves offer besides DHE, which
// Go does not implement (seen on Debian's OVMF 2022.11: it offers DHE-RSA
// and RSA suites only). Those suites have no forward secrecy; a client
// that offers ECDHE never gets them.
func FirmwareTLSCipherSuites() []uint16 {
	var ids []uint16
	for _, s := range tls.CipherSuites() {
		ids = append(ids, s.ID)
	}
	return append(ids, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384)
}
