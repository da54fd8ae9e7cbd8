package main

import (
	"time"

	"github.com/ironflow/ironflow/apiserver"
)

// keystoneFlags are the keystone auth strategy's service user and policy,
// as keystonemiddleware's [keystone_authtoken] and Ironic's [oslo_policy]
// (docs/security.md: Keystone and Ironic's policy).
type keystoneFlags struct {
	authURL, wwwAuthURI, user, password, project, userDomain, projectDomain, policyFile *string
	cacheCap                                                                            *time.Duration
}

func addKeystoneFlags(s *settings) keystoneFlags {
	return keystoneFlags{
		authURL:       s.String("keystone-auth-url", "", "Keystone v3 endpoint tokens are validated against (--auth-strategy keystone)", "IRONFLOW_KEYSTONE_AUTH_URL"),
		wwwAuthURI:    s.String("keystone-www-authenticate-uri", "", "Keystone URL announced in 401 answers (default: --keystone-auth-url)"),
		user:          s.String("keystone-username", "ironic", "service user that validates tokens"),
		password:      s.String("keystone-password", "", "service user's password", "IRONFLOW_KEYSTONE_PASSWORD"),
		project:       s.String("keystone-project-name", "service", "service user's project"),
		userDomain:    s.String("keystone-user-domain-name", "Default", "service user's domain"),
		projectDomain: s.String("keystone-project-domain-name", "Default", "service project's domain"),
		cacheCap:      s.Duration("keystone-token-cache-time", apiserver.DefaultKeystoneCacheCap, "longest a validated token is trusted before Keystone is asked again (a revoked token is refused within it)"),
		policyFile:    s.String("policy-file", "", "YAML or JSON file overriding Ironic's policy rules by name (keystone strategy)"),
	}
}

func (f keystoneFlags) config() apiserver.KeystoneConfig {
	return apiserver.KeystoneConfig{
		AuthURL: *f.authURL, WWWAuthenticateURI: *f.wwwAuthURI,
		Username: *f.user, Password: *f.password, ProjectName: *f.project,
		UserDomainName: *f.userDomain, ProjectDomainName: *f.projectDomain,
		CacheCap: *f.cacheCap, PolicyFile: *f.policyFile,
	}
}
