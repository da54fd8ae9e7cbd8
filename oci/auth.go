package oci

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"oras.land/oras-go/v2/registry/remote/auth"
)

// AuthFile is a file in the format of a container tool's config.json
// ({"auths": {"registry": {"auth": "<base64 user:password>"}}}): the
// conductor-wide credentials used when a node gives no pull secret, as
// Ironic's [oci]authentication_config (--oci-auth-file); "" for none.
var AuthFile string

// Credential is what ironflow presents to a registry. It is never logged,
// recorded in a workflow history or returned by the API.
type Credential struct {
	Username, Password string
}

// Empty reports whether c carries nothing.
func (c Credential) Empty() bool { return c.Username == "" && c.Password == "" }

// String hides the secret from any %v.
func (c Credential) String() string {
	if c.Empty() {
		return "(none)"
	}
	return "(credential)"
}

// PullSecret reads an image_pull_secret value in Ironic's format
// (image_service.get_image_service_auth_override's __extract_secret):
// "user:password" is basic credentials; a value without ":" is the
// pre-shared token of a container tool's config.json "auth" field. Such a
// token is base64 of "user:password": it is decoded so that registries
// with basic auth (which Ironic refuses a bare token for) take it too, and
// a value that does not decode is sent as the password of an empty user,
// as Ironic sends it to the token service.
func PullSecret(s string) Credential {
	s = strings.TrimSpace(s)
	if s == "" {
		return Credential{}
	}
	if u, p, ok := strings.Cut(s, ":"); ok {
		return Credential{Username: u, Password: p}
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		if u, p, ok := strings.Cut(string(b), ":"); ok && u != "" {
			return Credential{Username: u, Password: p}
		}
	}
	return Credential{Password: s}
}

// NodeCredential is the credential for a node's image: instance_info's
// image_pull_secret, else driver_info's, else the conductor-wide file's
// entry for the registry (Ironic's order).
func NodeCredential(instanceInfo, driverInfo map[string]any, registry string) (Credential, error) {
	for _, m := range []map[string]any{instanceInfo, driverInfo} {
		if v, _ := m["image_pull_secret"].(string); strings.TrimSpace(v) != "" {
			return PullSecret(v), nil
		}
	}
	return fileCredential(AuthFile, registry)
}

func fileCredential(path, registry string) (Credential, error) {
	if path == "" {
		return Credential{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("--oci-auth-file: %w", err)
	}
	var f struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return Credential{}, fmt.Errorf("--oci-auth-file: %s is not a container auth file: %v", path, err)
	}
	for host, a := range f.Auths {
		h := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://"), "/")
		if strings.EqualFold(h, registry) && a.Auth != "" {
			return PullSecret(a.Auth), nil
		}
	}
	return Credential{}, nil
}

func (c Credential) oras() auth.Credential {
	return auth.Credential{Username: c.Username, Password: c.Password}
}
