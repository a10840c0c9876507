package oci

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// Scheme prefixes a registry repository where a Git URL would be.
const Scheme = "oci://"

// Reference is one repository of one registry: oci://HOST[:PORT]/REPOSITORY.
type Reference struct {
	Host       string // host[:port], as credentials files key it
	Repository string // path inside the registry, without a tag or digest
}

// distribution's grammar for a repository's path components.
var repoPath = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*$`)

// IsURL tells whether raw names a registry repository rather than Git.
func IsURL(raw string) bool { return strings.HasPrefix(raw, Scheme) }

// ParseURL parses oci://HOST/REPOSITORY. A tag or digest belongs in the
// ref, not the URL; user information, a query or a fragment are refused
// (credentials come from a file). No error quotes the URL, which may hold
// a password.
func ParseURL(raw string) (Reference, error) {
	rest, ok := strings.CutPrefix(raw, Scheme)
	if !ok {
		return Reference{}, errors.New("not an oci:// URL")
	}
	host, repo, ok := strings.Cut(rest, "/")
	switch {
	case !ok || host == "" || repo == "":
		return Reference{}, errors.New("oci:// URL: want oci://HOST/REPOSITORY")
	case strings.ContainsAny(host, "@?#") || strings.ContainsAny(repo, "@?#:"):
		return Reference{}, errors.New("oci:// URL: want oci://HOST/REPOSITORY, with the tag or digest in --ref and credentials in --oci-credentials-file")
	case len(repo) > 255 || !repoPath.MatchString(repo):
		return Reference{}, fmt.Errorf("oci:// URL: %q is not a repository name (lower-case letters, digits, separators . _ - and /)", repo)
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		if h == "" || p == "" {
			return Reference{}, fmt.Errorf("oci:// URL: bad host %q", host)
		}
	}
	return Reference{Host: strings.ToLower(host), Repository: repo}, nil
}

func (r Reference) String() string { return Scheme + r.Host + "/" + r.Repository }

// Loopback tells whether the registry's host is this machine's loopback
// (localhost, 127.0.0.0/8, ::1): the only hosts plain HTTP may reach.
func (r Reference) Loopback() bool {
	h := r.Host
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

var (
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// IsDigest tells whether ref is a sha256 manifest digest, the form an OCI
// revision takes.
func IsDigest(ref string) bool { return digestPattern.MatchString(ref) }

// CheckRef validates an OCI --ref: a tag ("latest" when empty) or a
// sha256 digest.
func CheckRef(ref string) (string, error) {
	switch {
	case ref == "":
		return "latest", nil
	case strings.HasPrefix(ref, "sha256:"):
		if !IsDigest(ref) {
			return "", fmt.Errorf("ref %q: a digest is sha256: and 64 lower-case hex digits", ref)
		}
	case !tagPattern.MatchString(ref):
		return "", fmt.Errorf("ref %q is neither a tag (letters, digits, . _ -, at most 128) nor a sha256: digest", ref)
	}
	return ref, nil
}
