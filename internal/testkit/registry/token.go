package registry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// TokenService is the token service of a registry started with
// StartTokenAuth, written from the distribution project's "Token
// Authentication Specification" and "Token Authentication Implementation"
// (docs/spec/auth/token.md and jwt.md of distribution 2.8): GET
// <realm>?service=...&scope=repository:<name>:<actions> with the user's
// basic credentials answers {"token", "access_token", "expires_in",
// "issued_at"}, the token a JWT signed (ES256) by a key whose certificate
// is the registry's rootcertbundle and is sent in the JWT's x5c header.
type TokenService struct {
	URL      string        // the realm
	Service  string        // the registry's service name (the JWT's audience)
	Issuer   string        // the JWT's issuer
	Lifetime time.Duration // of every token handed out (60 s, the spec's default)

	key     *ecdsa.PrivateKey
	certDER []byte
	srv     *httptest.Server
	reg     *Registry

	mu     sync.Mutex
	issued []Issued
}

// Issued is one token the service handed out.
type Issued struct {
	Subject string    // the user it was issued to ("" anonymous)
	Scopes  []string  // as asked (repository:<name>:<actions>)
	Expires time.Time // its exp claim
	Token   string
}

// IssuedTokens are the tokens handed out so far.
func (s *TokenService) IssuedTokens() []Issued {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Issued(nil), s.issued...)
}

func startTokenService(t T, r *Registry, certPEM, keyPEM []byte) *TokenService {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "ironflow test token signer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	s := &TokenService{Service: "ironflow-test-registry", Issuer: "ironflow-test-token-service",
		Lifetime: time.Minute, key: key, certDER: der, reg: r}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	must(t, err)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/token"
	return s
}

// config is the registry's auth section for the service.
func (s *TokenService) config(dir string) string {
	bundle := filepath.Join(dir, "token-signer.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.certDER}), 0o600); err != nil {
		panic(err)
	}
	return fmt.Sprintf(`  token:
    realm: %s
    service: %s
    issuer: %s
    rootcertbundle: %s
`, s.URL, s.Service, s.Issuer, bundle)
}

func (s *TokenService) serve(w http.ResponseWriter, req *http.Request) {
	user, pass, ok := req.BasicAuth()
	if !ok || user != s.reg.User || pass != s.reg.Password {
		w.Header().Set("WWW-Authenticate", `Basic realm="ironflow-test-token-service"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return
	}
	if req.URL.Query().Get("service") != s.Service {
		http.Error(w, "unknown service", http.StatusBadRequest)
		return
	}
	scopes := req.URL.Query()["scope"]
	type access struct {
		Type    string   `json:"type"`
		Name    string   `json:"name"`
		Actions []string `json:"actions"`
	}
	var granted []access
	for _, sc := range scopes {
		for _, one := range strings.Fields(sc) {
			parts := strings.Split(one, ":")
			if len(parts) < 3 {
				continue
			}
			// repository:<name>:<actions>; a name may hold a port's colon.
			typ, actions := parts[0], parts[len(parts)-1]
			name := strings.Join(parts[1:len(parts)-1], ":")
			granted = append(granted, access{Type: typ, Name: name, Actions: strings.Split(actions, ",")})
		}
	}
	now := time.Now()
	exp := now.Add(s.Lifetime)
	jti := make([]byte, 16)
	rand.Read(jti)
	claims := map[string]any{
		"iss": s.Issuer, "sub": user, "aud": s.Service,
		"exp": exp.Unix(), "nbf": now.Add(-10 * time.Second).Unix(), "iat": now.Unix(),
		"jti": hex.EncodeToString(jti), "access": granted,
	}
	tok, err := s.sign(claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.issued = append(s.issued, Issued{Subject: user, Scopes: scopes, Expires: exp, Token: tok})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok,
		"expires_in": int(s.Lifetime / time.Second), "issued_at": now.UTC().Format(time.RFC3339)})
}

// sign is a compact JWS, ES256 (the signature r||s, 32 bytes each), with
// the signer's certificate in x5c (standard base64 DER).
func (s *TokenService) sign(claims map[string]any) (string, error) {
	hdr, err := json.Marshal(map[string]any{"typ": "JWT", "alg": "ES256",
		"x5c": []string{base64.StdEncoding.EncodeToString(s.certDER)}})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(hdr) + "." + enc.EncodeToString(body)
	sum := sha256.Sum256([]byte(signing))
	r, sg, err := ecdsa.Sign(rand.Reader, s.key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sg.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}
