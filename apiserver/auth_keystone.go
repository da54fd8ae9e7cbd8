package apiserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
)

// AuthKeystone is Ironic's keystone auth strategy: X-Auth-Token validated
// against Keystone v3, then Ironic's policy (policy*.go).
const AuthKeystone = "keystone"

// DefaultKeystoneCacheCap bounds how long a validated token is trusted
// without asking Keystone again, so that a revoked token is refused at most
// this long after its revocation (keystonemiddleware's token_cache_time,
// 300 s there, is shorter here on purpose).
const DefaultKeystoneCacheCap = 30 * time.Second

// KeystoneConfig is the service user ironflow validates tokens with, as
// keystonemiddleware's [keystone_authtoken] section.
type KeystoneConfig struct {
	// AuthURL is Keystone's identity endpoint, e.g.
	// "http://keystone.example.com:5000/v3".
	AuthURL string
	// WWWAuthenticateURI is announced to clients in 401 answers
	// (www_authenticate_uri); empty: AuthURL.
	WWWAuthenticateURI string
	Username, Password string
	// ProjectName is the service user's project (usually "service").
	ProjectName string
	// UserDomainName and ProjectDomainName default to "Default".
	UserDomainName, ProjectDomainName string
	// CacheCap bounds how long a token's validation is cached (also never
	// past the token's expires_at); DefaultKeystoneCacheCap when zero.
	CacheCap time.Duration
	// PolicyFile overrides Ironic's default rules by name (YAML or JSON).
	PolicyFile string
}

type keystoneAuth struct {
	cfg KeystoneConfig
	hc  *http.Client

	mu       sync.Mutex
	identity *gophercloud.ServiceClient
	cache    map[[32]byte]cachedToken
}

type cachedToken struct {
	creds *creds // nil: Keystone said the token is not valid
	until time.Time
}

func newKeystoneAuth(cfg KeystoneConfig) (*keystoneAuth, error) {
	if cfg.AuthURL == "" || cfg.Username == "" || cfg.Password == "" || cfg.ProjectName == "" {
		return nil, errors.New("auth strategy keystone needs the service user's auth URL, user name, password and project")
	}
	if cfg.UserDomainName == "" {
		cfg.UserDomainName = "Default"
	}
	if cfg.ProjectDomainName == "" {
		cfg.ProjectDomainName = "Default"
	}
	if cfg.CacheCap <= 0 {
		cfg.CacheCap = DefaultKeystoneCacheCap
	}
	if cfg.WWWAuthenticateURI == "" {
		cfg.WWWAuthenticateURI = cfg.AuthURL
	}
	return &keystoneAuth{cfg: cfg, hc: &http.Client{Timeout: 10 * time.Second}, cache: map[[32]byte]cachedToken{}}, nil
}

// client logs the service user in once; gophercloud logs in again when the
// service token expires (AllowReauth).
func (k *keystoneAuth) client(ctx context.Context) (*gophercloud.ServiceClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.identity != nil {
		return k.identity, nil
	}
	pc, err := openstack.NewClient(k.cfg.AuthURL)
	if err != nil {
		return nil, err
	}
	pc.HTTPClient = *k.hc
	opts := gophercloud.AuthOptions{
		IdentityEndpoint: k.cfg.AuthURL,
		Username:         k.cfg.Username,
		Password:         k.cfg.Password,
		DomainName:       k.cfg.UserDomainName,
		TenantName:       k.cfg.ProjectName,
		AllowReauth:      true,
		Scope:            &gophercloud.AuthScope{ProjectName: k.cfg.ProjectName, DomainName: k.cfg.ProjectDomainName},
	}
	if err := openstack.Authenticate(ctx, pc, opts); err != nil {
		return nil, fmt.Errorf("keystone: log in as service user %s: %w", k.cfg.Username, err)
	}
	sc, err := openstack.NewIdentityV3(pc, gophercloud.EndpointOpts{})
	if err != nil {
		return nil, err
	}
	// Validate against the configured endpoint, not the catalog's.
	sc.Endpoint = gophercloud.NormalizeURL(k.cfg.AuthURL)
	sc.ResourceBase = sc.Endpoint
	k.identity = sc
	return sc, nil
}

// errKeystoneDown: Keystone could not answer; the request gets 503 as
// keystonemiddleware answers then.
var errKeystoneDown = errors.New("keystone unavailable")

// validate returns the token's credentials, nil for a token Keystone
// refuses.
func (k *keystoneAuth) validate(ctx context.Context, token string) (*creds, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	k.mu.Lock()
	if e, ok := k.cache[key]; ok && now.Before(e.until) {
		k.mu.Unlock()
		return e.creds, nil
	}
	k.mu.Unlock()

	sc, err := k.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errKeystoneDown, err)
	}
	res := tokens.Get(ctx, sc, token)
	until := now.Add(k.cfg.CacheCap)
	var cr *creds
	switch {
	case gophercloud.ResponseCodeIs(res.Err, http.StatusNotFound), gophercloud.ResponseCodeIs(res.Err, http.StatusUnauthorized):
		// Not valid (expired, revoked, never issued): remembered for the
		// cap too, so a flood of bad tokens does not reach Keystone.
	case res.Err != nil:
		return nil, fmt.Errorf("%w: validate token: %w", errKeystoneDown, res.Err)
	default:
		// gophercloud's ExtractInto reads the body's "token" object.
		var t struct {
			ExpiresAt string `json:"expires_at"`
			User      struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"user"`
			Project *struct {
				ID     string `json:"id"`
				Name   string `json:"name"`
				Domain struct {
					ID string `json:"id"`
				} `json:"domain"`
			} `json:"project"`
			System map[string]bool `json:"system"`
			Roles  []struct {
				Name string `json:"name"`
			} `json:"roles"`
		}
		if err := res.ExtractInto(&t); err != nil {
			return nil, fmt.Errorf("%w: decode token: %w", errKeystoneDown, err)
		}
		cr = &creds{UserID: t.User.ID, UserName: t.User.Name}
		if t.Project != nil {
			cr.ProjectID, cr.ProjectName, cr.ProjectDomainID = t.Project.ID, t.Project.Name, t.Project.Domain.ID
		}
		if t.System["all"] {
			cr.SystemScope = "all"
		}
		for _, r := range t.Roles {
			cr.Roles = append(cr.Roles, r.Name)
		}
		if exp, err := time.Parse(time.RFC3339, t.ExpiresAt); err == nil && exp.Before(until) {
			until = exp
		}
	}
	k.mu.Lock()
	if len(k.cache) > 10000 {
		for key, e := range k.cache {
			if !now.Before(e.until) {
				delete(k.cache, key)
			}
		}
	}
	k.cache[key] = cachedToken{creds: cr, until: until}
	k.mu.Unlock()
	return cr, nil
}

// keystoneUnauthorized is keystonemiddleware's 401: its JSON body and the
// WWW-Authenticate header naming Keystone.
func (s *server) keystoneUnauthorized(c *gin.Context) {
	c.Header("WWW-Authenticate", fmt.Sprintf(`Keystone uri="%s"`, s.keystone.cfg.WWWAuthenticateURI))
	writeRaw(c, http.StatusUnauthorized, []byte(`{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`))
}

func (s *server) authenticateKeystone(c *gin.Context) {
	token := c.GetHeader("X-Auth-Token")
	if token == "" {
		s.keystoneUnauthorized(c)
		return
	}
	cr, err := s.keystone.validate(c.Request.Context(), token)
	if err != nil {
		s.log.ErrorContext(c.Request.Context(), "keystone token validation failed", "err", err)
		writeRaw(c, http.StatusServiceUnavailable, []byte(`{"error": {"code": 503, "title": "Service Unavailable", "message": "The Keystone service is temporarily unavailable."}}`))
		return
	}
	if cr == nil {
		s.keystoneUnauthorized(c)
		return
	}
	c.Set(ctxCreds, cr)
	c.Set(ctxUser, cr.UserName)
}
