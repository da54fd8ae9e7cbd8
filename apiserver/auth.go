package apiserver

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"
)

// basicRealm is the realm Ironic's http_basic strategy announces.
const basicRealm = `Basic realm="Baremetal API"`

// htpasswd holds bcrypt hashes by user name, as `htpasswd -B` writes them
// ("$2y$..."). Other hash schemes are refused at load time rather than
// silently never matching.
type htpasswd struct {
	users map[string][]byte
}

func loadHtpasswd(path string) (*htpasswd, error) {
	if path == "" {
		return nil, fmt.Errorf("auth strategy %s needs an htpasswd file", AuthHTTPBasic)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	h := &htpasswd{users: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		user, hash, ok := strings.Cut(text, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("%s line %d: want user:hash", path, line)
		}
		if !strings.HasPrefix(hash, "$2y$") && !strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") {
			return nil, fmt.Errorf("%s line %d: user %s: only bcrypt hashes (htpasswd -B) are supported", path, line, user)
		}
		h.users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return h, nil
}

// check reports whether user/password match. An unknown user still costs a
// bcrypt comparison so that timing does not tell which users exist.
func (h *htpasswd) check(user, password string) bool {
	hash, ok := h.users[user]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
}

// dummyHash is a bcrypt hash compared against for unknown users.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("ironflow-no-such-user"), bcrypt.DefaultCost)
	return h
})

// authenticate enforces the auth strategy on the protected routes.
func (s *server) authenticate(c *gin.Context) {
	if s.internal {
		c.Set(ctxUser, c.GetHeader(headerRolloutUser))
		c.Set(ctxRollout, c.GetHeader(headerRollout))
		return
	}
	if s.keystone != nil {
		s.authenticateKeystone(c)
		return
	}
	if s.auth == nil {
		return
	}
	user, pass, ok := c.Request.BasicAuth()
	if !ok {
		c.Header("WWW-Authenticate", basicRealm)
		s.writeError(c, errorf(http.StatusUnauthorized, "Authorization required"))
		return
	}
	if !s.auth.check(user, pass) {
		c.Header("WWW-Authenticate", basicRealm)
		s.writeError(c, errorf(http.StatusUnauthorized, "Incorrect username or password"))
		return
	}
	c.Set(ctxUser, user)
}

// setupKeystone prepares the keystone strategy: the token validator and
// the policy (Ironic's defaults, then the policy file's overrides).
func (s *server) setupKeystone() error {
	k, err := newKeystoneAuth(s.cfg.Keystone)
	if err != nil {
		return err
	}
	p, err := newPolicyEngine(s.cfg.Keystone.PolicyFile)
	if err != nil {
		return err
	}
	s.keystone, s.policy = k, p
	return nil
}
