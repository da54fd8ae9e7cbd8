package payload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
)

func mustCodec(t *testing.T, k Keys) *Codec {
	t.Helper()
	c, err := NewCodec(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k, err := ParseKey(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type secretInput struct {
	Node     string `json:"node"`
	Password string `json:"password"`
}

const marker = "MARKER-unit-4c1e"

func TestRoundTripHidesThePlaintext(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	dc := DataConverter(c)
	p, err := dc.ToPayload(secretInput{Node: "n1", Password: marker})
	if err != nil {
		t.Fatal(err)
	}
	if !Encrypted(p) || string(p.Metadata[MetadataKeyID]) != c.CurrentKeyID() {
		t.Fatalf("payload metadata %v, want encoding %s and key id %s", p.Metadata, EncodingEncrypted, c.CurrentKeyID())
	}
	if bytes.Contains(p.Data, []byte(marker)) || bytes.Contains(p.Data, []byte("json/plain")) {
		t.Fatal("the encrypted payload shows its plaintext or its inner encoding")
	}
	var got secretInput
	if err := dc.FromPayload(p, &got); err != nil {
		t.Fatal(err)
	}
	if got.Password != marker || got.Node != "n1" {
		t.Fatalf("round trip gave %+v", got)
	}
	// Two seals of the same value differ: a fresh nonce each.
	q, _ := dc.ToPayload(secretInput{Node: "n1", Password: marker})
	if bytes.Equal(p.Data, q.Data) {
		t.Fatal("two encryptions of one value are equal: the nonce is reused")
	}
}

func TestRotationOpensPreviousKeys(t *testing.T) {
	old, cur := newKey(t), newKey(t)
	before := DataConverter(mustCodec(t, Keys{Current: old}))
	p, _ := before.ToPayload("sealed before the rotation")
	after := mustCodec(t, Keys{Current: cur, Previous: [][]byte{old}})
	var s string
	if err := DataConverter(after).FromPayload(p, &s); err != nil || s != "sealed before the rotation" {
		t.Fatalf("previous key: %q, %v", s, err)
	}
	q, _ := DataConverter(after).ToPayload("sealed after")
	if string(q.Metadata[MetadataKeyID]) != KeyID(cur) {
		t.Fatalf("new payloads sealed with key %s, want the current %s", q.Metadata[MetadataKeyID], KeyID(cur))
	}
	// Once the old key is dropped, its payloads no longer open.
	_, err := mustCodec(t, Keys{Current: cur}).Decode([]*commonpb.Payload{p})
	if err == nil || !strings.Contains(err.Error(), KeyID(old)) {
		t.Fatalf("dropped key: %v, want an error naming key %s", err, KeyID(old))
	}
}

func TestTamperedPayloadIsRefused(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	enc, _ := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"x"`)}})
	for name, alter := range map[string]func(p *commonpb.Payload){
		"flipped bit":   func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 },
		"flipped nonce": func(p *commonpb.Payload) { p.Data[0] ^= 1 },
		"truncated":     func(p *commonpb.Payload) { p.Data = p.Data[:10] },
	} {
		p := &commonpb.Payload{Metadata: enc[0].Metadata, Data: append([]byte(nil), enc[0].Data...)}
		alter(p)
		if _, err := c.Decode([]*commonpb.Payload{p}); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestWrongKeyIsRefused(t *testing.T) {
	a, b := newKey(t), newKey(t)
	enc, _ := mustCodec(t, Keys{Current: a}).Encode([]*commonpb.Payload{{Data: []byte("secret")}})
	if _, err := mustCodec(t, Keys{Current: b}).Decode(enc); err == nil {
		t.Fatal("decoded with another key")
	}
	// A payload claiming the other key's ID is refused by GCM, not read.
	forged := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(EncodingEncrypted), MetadataKeyID: []byte(KeyID(b))}, Data: enc[0].Data}
	if _, err := mustCodec(t, Keys{Current: b}).Decode([]*commonpb.Payload{forged}); err == nil {
		t.Fatal("a ciphertext of key a opened under key b's ID")
	}
}

func TestPlainPayloadsPassThrough(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	plain, _ := converter.GetDefaultDataConverter().ToPayload(secretInput{Node: "recorded before the codec"})
	out, err := c.Decode([]*commonpb.Payload{plain})
	if err != nil || out[0] != plain {
		t.Fatalf("plain payload: %v, %v", out, err)
	}
	var got secretInput
	if err := DataConverter(c).FromPayload(plain, &got); err != nil || got.Node != "recorded before the codec" {
		t.Fatalf("read a history recorded before the codec: %+v %v", got, err)
	}
}

func TestFailureMessagesAreEncrypted(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	fc := FailureConverter(DataConverter(c))
	f := fc.ErrorToFailure(temporal.NewApplicationError("download http://user:"+marker+"@images/x failed", "ImageError"))
	if strings.Contains(f.String(), marker) {
		t.Fatalf("failure shows its message: %v", f)
	}
	back := fc.FailureToError(f)
	var app *temporal.ApplicationError
	if !errors.As(back, &app) || !strings.Contains(app.Error(), marker) || app.Type() != "ImageError" {
		t.Fatalf("failure round trip: %v", back)
	}
}

func TestParseAndLoadKeys(t *testing.T) {
	raw := newKey(t)
	for _, s := range []string{hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw), " " + base64.StdEncoding.EncodeToString(raw) + "\n"} {
		got, err := ParseKey(s)
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("ParseKey(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "short", base64.StdEncoding.EncodeToString(raw[:16]), strings.Repeat("z", 64)} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
	if _, err := LoadKeys("", "", ""); err == nil || !strings.Contains(err.Error(), "--payload-key") {
		t.Errorf("no key: %v", err)
	}
	cur, prev, older := GenerateKey(), GenerateKey(), GenerateKey()
	file := filepath.Join(t.TempDir(), "payload.key")
	if err := os.WriteFile(file, []byte(cur+"\n"+prev+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeys("", file, older)
	if err != nil {
		t.Fatal(err)
	}
	want := func(s string) []byte { b, _ := ParseKey(s); return b }
	if !bytes.Equal(k.Current, want(cur)) || len(k.Previous) != 2 || !bytes.Equal(k.Previous[0], want(prev)) || !bytes.Equal(k.Previous[1], want(older)) {
		t.Errorf("keys from file and flag: %+v", k)
	}
	// The value replaces the file's current key; the file's previous stays.
	if k, err = LoadKeys(older, file, ""); err != nil || !bytes.Equal(k.Current, want(older)) || len(k.Previous) != 1 {
		t.Errorf("value over file: %+v %v", k, err)
	}
	if _, err := LoadKeys(cur, "", "not-a-key"); err == nil || !strings.Contains(err.Error(), "previous") {
		t.Errorf("bad previous key: %v", err)
	}
}

func TestDecodeHistoryJSON(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	in, _ := DataConverter(c).ToPayloads(secretInput{Password: marker})
	sa, _ := converter.GetDefaultDataConverter().ToPayload("node-uuid")
	h := &historypb.History{Events: []*historypb.HistoryEvent{{
		EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			Input:            in,
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"NodeUUID": sa}},
		}},
	}}}
	raw, _ := protojson.Marshal(h)
	if bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString([]byte(marker))[:8])) {
		t.Fatal("the marker shows in the encrypted history")
	}
	out, err := DecodeHistoryJSON(context.Background(), c, raw)
	if err != nil {
		t.Fatal(err)
	}
	var back historypb.History
	if err := protojson.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	p := back.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	if !strings.Contains(string(p.Data), marker) {
		t.Fatalf("decoded input %q", p.Data)
	}
}

// basic accepts one user and password.
type basic struct{ user, pass string }

func (b basic) Authenticate(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && u == b.user && p == b.pass
}

func TestCodecServer(t *testing.T) {
	c := mustCodec(t, Keys{Current: newKey(t)})
	const ui = "http://127.0.0.1:8233"
	srv := httptest.NewServer(Handler(c, ServerConfig{Auth: basic{"op", "pw"}, AllowedOrigins: []string{ui}, Namespace: "default"}))
	defer srv.Close()
	enc, _ := DataConverter(c).ToPayloads(secretInput{Password: marker})
	body, _ := protojson.Marshal(enc)
	post := func(path string, auth bool, ns string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", ui)
		if ns != "" {
			req.Header.Set("X-Namespace", ns)
		}
		if auth {
			req.SetBasicAuth("op", "pw")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp, b.String()
	}
	if resp, text := post("/decode", false, "default"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(text, marker) || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("unauthenticated decode: %d %s", resp.StatusCode, text)
	}
	resp, text := post("/decode", true, "default")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Fatalf("decode: %d %v %s", resp.StatusCode, resp.Header, text)
	}
	var dec commonpb.Payloads
	if err := protojson.Unmarshal([]byte(text), &dec); err != nil {
		t.Fatal(err)
	}
	var got secretInput
	if err := json.Unmarshal(dec.Payloads[0].Data, &got); err != nil || got.Password != marker {
		t.Fatalf("decoded %q: %v", dec.Payloads[0].Data, err)
	}
	if resp, _ := post("/decode", true, "other"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("decode for another namespace: %d", resp.StatusCode)
	}
	// Encode (the UI's signal or start forms) seals with the current key.
	if resp, text := post("/encode", true, ""); resp.StatusCode != http.StatusOK || !strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(EncodingEncrypted))) {
		t.Errorf("encode: %d %s", resp.StatusCode, text)
	}
	// The browser's preflight carries no credentials.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", ui)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-namespace")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != ui ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "X-Namespace") || pre.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
	// Another origin gets no CORS grant.
	req, _ = http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://evil.example")
	pre, _ = http.DefaultClient.Do(req)
	pre.Body.Close()
	if pre.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS granted to another origin: %v", pre.Header)
	}
}

// BenchmarkSealAndOpen is the codec's cost per payload of a typical
// activity input (1 KiB of JSON).
func BenchmarkSealAndOpen(b *testing.B) {
	k, _ := ParseKey(GenerateKey())
	c, _ := NewCodec(Keys{Current: k})
	p := []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: bytes.Repeat([]byte("x"), 1024)}}
	b.SetBytes(1024)
	for b.Loop() {
		enc, err := c.Encode(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
