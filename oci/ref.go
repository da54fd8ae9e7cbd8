// Package oci resolves image sources of the form oci://registry/repo:tag or
// oci://registry/repo@sha256:<hex> to the disk image layer a node deploys,
// with Ironic's rules (Ironic's ironic/common/image_service.py,
// OciImageService, and ironic/common/oci_registry.py; docs/oci-images.md).
// The registry is spoken to through oras-go (oras.land/oras-go/v2), never
// by hand.
package oci

import (
	"errors"
	"fmt"
	"strings"
)

// Scheme is the prefix of an OCI image source.
const Scheme = "oci://"

// IsOCI reports whether an image_source names an image in an OCI registry
// (Ironic's image_service.is_container_registry_url, for the oci:// form).
func IsOCI(src string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(src)), Scheme)
}

// Ref is a parsed oci:// reference.
type Ref struct {
	Registry   string // host[:port]
	Repository string // path below the registry, without a leading slash
	Tag        string // set when the reference is by tag ("latest" if none)
	Digest     string // set when the reference is by digest (algo:hex)
}

// String is the reference as an oci:// URL (by digest when it has one).
func (r Ref) String() string {
	if r.Digest != "" {
		return Scheme + r.Registry + "/" + r.Repository + "@" + r.Digest
	}
	return Scheme + r.Registry + "/" + r.Repository + ":" + r.Tag
}

// Reference is what the registry's manifests endpoint is asked for.
func (r Ref) Reference() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}

// WithDigest is r pinned to a manifest digest.
func (r Ref) WithDigest(d string) Ref {
	r.Digest, r.Tag = d, ""
	return r
}

// Parse reads oci://host[:port]/path[:tag|@algo:hex]. A reference without a
// tag or digest names the tag "latest", as Ironic assumes
// (doc/source/admin/oci-container-registry.rst, "Available URL Formats").
// A digest is checked as Ironic's OciImageService._validate_url_is_specific
// does: sha256 of 64 or sha512 of 128 hex digits.
func Parse(src string) (Ref, error) {
	s := strings.TrimSpace(src)
	if !IsOCI(s) {
		return Ref{}, refError(src, "URL scheme must be \"oci\"")
	}
	s = s[len(Scheme):]
	host, path, ok := strings.Cut(s, "/")
	if !ok || host == "" || path == "" {
		return Ref{}, refError(src, "an OCI image reference needs a registry host and a repository path")
	}
	if strings.Contains(host, "@") {
		// Not echoed: the text before "@" is a credential.
		return Ref{}, &Error{Kind: ErrInvalid, Msg: "Validation of image href oci://(credentials hidden) failed, reason: an oci:// URL carries no credentials: use instance_info/image_pull_secret"}
	}
	r := Ref{Registry: strings.ToLower(host)}
	if repo, dg, ok := strings.Cut(path, "@"); ok {
		algo, hex, ok := strings.Cut(dg, ":")
		if !ok {
			return Ref{}, refError(src, "Lacking required digest value")
		}
		algo, hex = strings.ToLower(algo), strings.ToLower(hex)
		want := map[string]int{"sha256": 64, "sha512": 128}[algo]
		if want == 0 {
			return Ref{}, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("The requested image (%s) was not specific. Please supply a full URL mapping to the manifest to be utilized for the file download.", src)}
		}
		if len(hex) != want || strings.Trim(hex, "0123456789abcdef") != "" {
			// Ironic's text, its spelling kept.
			return Ref{}, refError(src, "Manifest digest length incorrect and does not match the expected lenngth of the algorithm.")
		}
		r.Repository, r.Digest = repo, algo+":"+hex
	} else {
		r.Repository, r.Tag = path, "latest"
		if i := strings.LastIndex(path, ":"); i >= 0 {
			r.Repository, r.Tag = path[:i], path[i+1:]
		}
	}
	if r.Repository == "" || r.Repository != strings.ToLower(r.Repository) || strings.Contains(r.Repository, "//") || r.Tag == "" && r.Digest == "" {
		return Ref{}, refError(src, "an OCI repository path is lower case, non-empty, with a non-empty tag")
	}
	return r, nil
}

// ErrorKind classifies a resolution failure: what the user must fix, or a
// registry that did not answer (worth retrying).
type ErrorKind int

const (
	ErrInvalid     ErrorKind = iota // the reference or the image is unusable
	ErrNotFound                     // no such repository, tag or manifest
	ErrAuth                         // the registry wants (other) credentials
	ErrChecksum                     // content does not match its digest
	ErrUnavailable                  // the registry did not answer
)

// Error is a resolution failure worded as Ironic words it.
type Error struct {
	Kind ErrorKind
	Msg  string
	Err  error // the cause, for logs; never holds a credential
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Is matches errors of the same kind, so that errors.Is(err, Unavailable)
// tells a retryable failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Kind == e.Kind
}

// Unavailable matches (errors.Is) a registry that did not answer.
var Unavailable = &Error{Kind: ErrUnavailable}

// KindOf is err's kind, ErrInvalid when it is not an *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ErrInvalid
}

// refError is Ironic's ImageRefValidationFailed text.
func refError(href, reason string) *Error {
	return &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Validation of image href %s failed, reason: %s", href, reason)}
}
