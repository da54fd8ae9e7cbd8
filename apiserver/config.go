package apiserver

import (
	"context"
	"time"

	"github.com/ironflow/ironflow/glance"
)

// Defaults of Config, as Ironic's [api] and [agent] options where one exists.
const (
	DefaultListen                  = "127.0.0.1:6385"
	DefaultAuthStrategy            = AuthNoAuth
	DefaultMaxLimit                = 1000
	DefaultRestrictLookup          = true
	DefaultRamdiskHeartbeatTimeout = 300 * time.Second
	DefaultAgentTokenRequired      = true
	// DefaultConductorName is the host name shown where Ironic shows a
	// conductor (driver hosts, NodeLocked messages without a reservation).
	DefaultConductorName = "ironflow"
	// DefaultConductorHeartbeatTimeout is Ironic's
	// [conductor]heartbeat_timeout: a worker whose last heartbeat is older
	// is not alive.
	DefaultConductorHeartbeatTimeout = 60 * time.Second
)

// Auth strategies, Ironic's [DEFAULT]auth_strategy values this API knows.
const (
	AuthNoAuth    = "noauth"
	AuthHTTPBasic = "http_basic"
	// AuthKeystone is in auth_keystone.go.
)

// Config is the API's configuration.
type Config struct {
	// SignalKey signs the heartbeat signals sent to workflows (package
	// signature); the worker verifies them with the same key. Empty: signals
	// go unsigned, and a worker with a key ignores them.
	SignalKey []byte
	// Listen is the address the API serves on (used by the caller).
	Listen string
	// AuthStrategy is AuthNoAuth, AuthHTTPBasic or AuthKeystone.
	AuthStrategy string
	// HtpasswdFile holds "user:bcrypt-hash" lines for AuthHTTPBasic.
	HtpasswdFile string
	// Keystone is the service user and policy of AuthKeystone.
	Keystone KeystoneConfig
	// MaxLimit caps the page size of every list, as [api]max_limit.
	MaxLimit int
	// PublicURL is the base of links and Location headers, e.g.
	// "https://baremetal.example.com:6385". Empty: derived from the request.
	PublicURL string
	// RestrictLookup limits agent lookups to nodes in lookup states.
	RestrictLookup bool
	// RamdiskHeartbeatTimeout is sent to the agent (it heartbeats every
	// 0.3–0.6 of it).
	RamdiskHeartbeatTimeout time.Duration
	// AgentTokenRequired refuses heartbeats without the lookup token.
	AgentTokenRequired bool
	// InspectionWithoutToken accepts continue_inspection from an agent that
	// did not look up first (so carries no token), as Ironic did before it
	// required the agent token for inspection. Off by default: anyone on
	// the provisioning network could then write a node's inventory.
	InspectionWithoutToken bool
	// AllowedDrivers restricts node drivers (hardware types); empty: all of
	// ipmi, redfish and fake-hardware.
	AllowedDrivers []string
	// ConductorName is the host name reported where Ironic reports a
	// conductor.
	ConductorName string
	// ConductorHeartbeatTimeout: a registered worker is alive (listed so,
	// and chosen as a node's conductor) while its last heartbeat is this
	// recent.
	ConductorHeartbeatTimeout time.Duration
	// Glance answers validate's questions about an image_source naming a
	// Glance image (nil: no Glance configured, which validate then says).
	Glance ImageService
	// ConsoleTokenTTL is how long a console page's token is valid, as
	// Ironic's [vnc] token_timeout (console.DefaultTokenTTL when 0).
	ConsoleTokenTTL time.Duration
	// ConsoleNoVNCDir holds Debian's novnc files for the graphical console
	// page (web.DefaultNoVNCDir when empty); ConsoleAllowedOrigins are the
	// other pages' origins that may open console websockets (console/web).
	ConsoleNoVNCDir       string
	ConsoleAllowedOrigins []string
}

// ImageService is what validate asks of Glance (*glance.Client).
type ImageService interface {
	Resolve(ctx context.Context, id string) (*glance.Image, error)
	ResolveFile(ctx context.Context, id string) (*glance.Image, error)
}

// DefaultConfig returns the configuration with every default filled.
func DefaultConfig() Config {
	return Config{
		Listen:                  DefaultListen,
		AuthStrategy:            DefaultAuthStrategy,
		MaxLimit:                DefaultMaxLimit,
		RestrictLookup:          DefaultRestrictLookup,
		RamdiskHeartbeatTimeout: DefaultRamdiskHeartbeatTimeout,
		AgentTokenRequired:      DefaultAgentTokenRequired,
		ConductorName:           DefaultConductorName,

		ConductorHeartbeatTimeout: DefaultConductorHeartbeatTimeout,
	}
}

// withDefaults fills zero fields that have no meaningful zero value.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.AuthStrategy == "" {
		c.AuthStrategy = d.AuthStrategy
	}
	if c.MaxLimit <= 0 {
		c.MaxLimit = d.MaxLimit
	}
	if c.RamdiskHeartbeatTimeout <= 0 {
		c.RamdiskHeartbeatTimeout = d.RamdiskHeartbeatTimeout
	}
	if c.ConductorName == "" {
		c.ConductorName = d.ConductorName
	}
	if c.ConductorHeartbeatTimeout <= 0 {
		c.ConductorHeartbeatTimeout = d.ConductorHeartbeatTimeout
	}
	return c
}
