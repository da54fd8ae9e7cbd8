// Package payload encrypts what ironflow's processes hand to Temporal:
// workflow and activity inputs and results, signals, queries, markers and
// failure messages are sealed with AES-256-GCM before they leave the
// process, so that a workflow history read from the Temporal frontend or its
// Web UI shows ciphertext (docs/security.md, "The payload codec"). Search
// attributes, workflow IDs, activity and signal names and task queues are
// not payloads and stay readable.
//
// Each encrypted payload carries the ID of its key in its metadata, so that
// the key can be rotated: payloads are sealed with the current key and
// opened with the current or a previous one. A payload that is not
// encrypted (a history recorded before the codec, a signal sent with the
// temporal CLI) passes through unchanged.
package payload

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// The metadata of an encrypted payload, as the Temporal samples' encryption
// codec names it: the Web UI and the temporal CLI show such a payload as
// "binary/encrypted" until a codec server decodes it.
const (
	EncodingEncrypted = "binary/encrypted"
	MetadataKeyID     = "encryption-key-id"
)

// KeySize is the length of a key: AES-256.
const KeySize = 32

// nonceSize is GCM's standard nonce, random per payload: 2^32 payloads per
// key keep the collision probability below NIST SP 800-38D's 2^-32 bound,
// far beyond what a key sees before it is rotated.
const nonceSize = 12

// Keys are the payload keys: Current seals, Current and Previous open.
type Keys struct {
	Current  []byte
	Previous [][]byte
}

// ParseKey reads a key written as 64 hex digits or as base64 (standard or
// URL alphabet, padded or not) of 32 bytes, as `openssl rand -hex 32` and
// `openssl rand -base64 32` print them.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("payload key is %d bytes, want %d (openssl rand -base64 32)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("payload key is neither 64 hex digits nor base64 of %d bytes (openssl rand -base64 32)", KeySize)
}

// LoadKeys reads the keys from a value and a file (either may be empty) and
// a comma-separated list of previous keys. The file holds the current key
// on its first line and previous keys on the lines after it; value, when
// set, is the current key instead of the file's first line.
func LoadKeys(value, file, previous string) (Keys, error) {
	var lines []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Keys{}, fmt.Errorf("read payload key file: %w", err)
		}
		lines = strings.Fields(string(b))
	}
	if value != "" {
		if len(lines) == 0 {
			lines = []string{value}
		} else {
			lines[0] = value
		}
	}
	if len(lines) == 0 {
		return Keys{}, errors.New("no payload key: set --payload-key or --payload-key-file (IRONFLOW_PAYLOAD_KEY, IRONFLOW_PAYLOAD_KEY_FILE), 32 bytes as base64 (openssl rand -base64 32), the same for every ironflow process that talks to Temporal")
	}
	for _, p := range strings.Split(previous, ",") {
		if p = strings.TrimSpace(p); p != "" {
			lines = append(lines, p)
		}
	}
	var k Keys
	for i, l := range lines {
		b, err := ParseKey(l)
		if err != nil {
			if i == 0 {
				return Keys{}, err
			}
			return Keys{}, fmt.Errorf("previous %w", err)
		}
		if i == 0 {
			k.Current = b
		} else {
			k.Previous = append(k.Previous, b)
		}
	}
	return k, nil
}

// GenerateKey makes a random key, base64 as ParseKey reads it.
func GenerateKey() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// KeyID names a key in the payloads it seals without revealing it: the
// first 8 bytes of a SHA-256 over a label and the key, in hex.
func KeyID(key []byte) string {
	h := sha256.Sum256(append([]byte("ironflow payload key id\x00"), key...))
	return hex.EncodeToString(h[:8])
}

// Codec is the AES-256-GCM PayloadCodec.
type Codec struct {
	currentID string
	aeads     map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec builds the codec of keys.
func NewCodec(k Keys) (*Codec, error) {
	if len(k.Current) == 0 {
		return nil, errors.New("payload codec: no current key")
	}
	c := &Codec{currentID: KeyID(k.Current), aeads: map[string]cipher.AEAD{}}
	for _, key := range append([][]byte{k.Current}, k.Previous...) {
		if len(key) != KeySize {
			return nil, fmt.Errorf("payload codec: key is %d bytes, want %d", len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("payload codec: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("payload codec: %w", err)
		}
		c.aeads[KeyID(key)] = aead
	}
	return c, nil
}

// CurrentKeyID is the ID of the key new payloads are sealed with.
func (c *Codec) CurrentKeyID() string { return c.currentID }

// additionalData binds a ciphertext to its key ID, so that the metadata
// cannot be swapped without the open failing.
func additionalData(keyID string) []byte { return []byte("ironflow payload v1\x00" + keyID) }

// Encode seals every payload with the current key: the whole payload
// (metadata and data) becomes the ciphertext, nonce first.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.currentID]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("payload codec: marshal payload: %w", err)
		}
		sealed := make([]byte, nonceSize, nonceSize+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, fmt.Errorf("payload codec: nonce: %w", err)
		}
		sealed = aead.Seal(sealed, sealed[:nonceSize], plain, additionalData(c.currentID))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.currentID),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode opens every encrypted payload with the key its metadata names and
// passes the others through.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !Encrypted(p) {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("payload codec: payload sealed with key %q, which is neither the current key (%s) nor a previous one: configure it with --payload-key-previous", id, c.currentID)
		}
		data := p.GetData()
		if len(data) < nonceSize+aead.Overhead() {
			return nil, fmt.Errorf("payload codec: encrypted payload of %d bytes is too short", len(data))
		}
		plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], additionalData(id))
		if err != nil {
			return nil, fmt.Errorf("payload codec: payload sealed with key %s does not open (altered or damaged): %w", id, err)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return nil, fmt.Errorf("payload codec: decrypted payload: %w", err)
		}
		out[i] = &orig
	}
	return out, nil
}

// Encrypted reports whether p is sealed by a codec like this one.
func Encrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == EncodingEncrypted
}

// DataConverter is Temporal's default converter with c applied to every
// payload it produces.
func DataConverter(c *Codec) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter carries failure messages and stack traces in an
// encoded (so encrypted) payload instead of plain text: an activity error
// may name what its input held.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}

// Apply sets o's data and failure converters to the codec's: every client
// ironflow dials goes through it, and the workers built on the client
// inherit it. A nil codec leaves o as it is.
func (c *Codec) Apply(o *client.Options) {
	if c == nil {
		return
	}
	o.DataConverter = DataConverter(c)
	o.FailureConverter = FailureConverter(o.DataConverter)
}
