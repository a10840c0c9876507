package oci

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Options say how to reach a registry.
type Options struct {
	// CredentialsFile is a dockerconfigjson file ({"auths": {HOST: {"auth":
	// base64(user:password)}}}, what `kubectl create secret
	// docker-registry` makes), read at every request batch. Credential
	// helpers it names are never run.
	CredentialsFile string
	// CAFile holds PEM certificates trusted for the registry's TLS, in
	// addition to the system's, read at every request batch.
	CAFile string
	// Insecure speaks plain HTTP; New refuses it for a host that is not
	// loopback.
	Insecure bool
	// UserAgent is sent with every request.
	UserAgent string
}

// MaxManifestBytes is the largest manifest a Client reads (the
// distribution spec's suggested limit).
const MaxManifestBytes = 4 << 20

// Client reads one repository of a registry. It is safe for concurrent use.
type Client struct {
	ref Reference
	opt Options

	mu       sync.Mutex
	credSum  [32]byte   // what the credentials file held when cache was made
	cache    auth.Cache // bearer tokens and schemes, kept while the credentials are
	caSum    [32]byte
	hc       *http.Client
	haveHTTP bool
}

// New returns a Client for ref. It reads nothing yet.
func New(ref Reference, opt Options) (*Client, error) {
	if opt.Insecure && !ref.Loopback() {
		return nil, fmt.Errorf("%s: --oci-insecure (plain HTTP) is allowed only for a loopback registry (localhost, 127.0.0.0/8, ::1)", ref)
	}
	if opt.Insecure && opt.CAFile != "" {
		return nil, fmt.Errorf("%s: a CA file is for TLS; --oci-insecure speaks plain HTTP", ref)
	}
	return &Client{ref: ref, opt: opt}, nil
}

// Reference is the repository the Client reads.
func (c *Client) Reference() Reference { return c.ref }

// repository reads the credentials and CA files and returns oras's view of
// the repository for one batch of requests.
func (c *Client) repository() (*remote.Repository, error) {
	var cred []byte
	if c.opt.CredentialsFile != "" {
		b, err := os.ReadFile(c.opt.CredentialsFile)
		if err != nil {
			return nil, &Error{Reason: ReasonAuth, Err: fmt.Errorf("read --oci-credentials-file: %w", errors.Unwrap(err))}
		}
		cred = b
	}
	var ca []byte
	if c.opt.CAFile != "" {
		b, err := os.ReadFile(c.opt.CAFile)
		if err != nil {
			return nil, &Error{Reason: ReasonOther, Err: fmt.Errorf("read --oci-ca-file: %w", errors.Unwrap(err))}
		}
		ca = b
	}
	store := credentials.NewMemoryStore()
	if len(cred) > 0 {
		s, err := credentials.NewMemoryStoreFromDockerConfig(cred)
		if err != nil {
			// The parser's error may quote the file: say only what it is.
			return nil, &Error{Reason: ReasonAuth, Err: errors.New("--oci-credentials-file is not a dockerconfigjson file ({\"auths\": {HOST: {\"auth\": ...}}})")}
		}
		store = s
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if sum := sha256.Sum256(cred); c.cache == nil || sum != c.credSum {
		// New credentials start without the tokens the old ones earned.
		c.credSum, c.cache = sum, auth.NewCache()
	}
	if sum := sha256.Sum256(ca); !c.haveHTTP || sum != c.caSum {
		hc, err := c.httpClient(ca)
		if err != nil {
			return nil, err
		}
		c.caSum, c.hc, c.haveHTTP = sum, hc, true
	}
	repo, err := remote.NewRepository(c.ref.Host + "/" + c.ref.Repository)
	if err != nil {
		return nil, invalidf("%s: %v", c.ref, err)
	}
	repo.PlainHTTP = c.opt.Insecure
	repo.SkipReferrersGC = true
	// A registry that pages its answers forever is not followed forever.
	repo.ReferrerListMaxPages, repo.TagListMaxPages = 16, 16
	repo.Client = &auth.Client{
		Client:     c.hc,
		Header:     http.Header{"User-Agent": {c.opt.UserAgent}},
		Credential: credentialFor(store),
		Cache:      c.cache,
	}
	return repo, nil
}

// credentialFor looks a registry's credentials up by its host[:port] as
// dockerconfigjson keys them (scheme and path dropped); Docker Hub's,
// which the Docker CLI writes under https://index.docker.io/v1/, for any
// of its names.
func credentialFor(store credentials.Store) auth.CredentialFunc {
	return func(ctx context.Context, hostport string) (auth.Credential, error) {
		keys := []string{hostport}
		switch hostport {
		case "docker.io", "registry-1.docker.io", "index.docker.io":
			keys = []string{"index.docker.io", "registry-1.docker.io", "docker.io"}
		}
		for _, k := range keys {
			cred, err := store.Get(ctx, k)
			if err != nil {
				return auth.EmptyCredential, err
			}
			if cred != auth.EmptyCredential {
				return cred, nil
			}
		}
		return auth.EmptyCredential, nil
	}
}

// httpClient is the transport to the registry: TLS 1.2 or later with the
// system's roots and ca's, no downgrade to plain HTTP on a redirect.
func (c *Client) httpClient(ca []byte) (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if len(ca) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, &Error{Reason: ReasonOther, Err: errors.New("--oci-ca-file holds no PEM certificate")}
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	} else {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport: loopbackOnlyHTTP{t},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				// Not a failure that passes: the registry (or what stands
				// before it) sends recond where it will not go.
				return &Error{Reason: ReasonForbidden, Err: fmt.Errorf("refused a redirect from https to %s://%s: credentials "+
					"and content would cross the network in clear; the registry must redirect to https", req.URL.Scheme, req.URL.Host)}
			}
			return nil
		},
	}, nil
}

// loopbackOnlyHTTP refuses a plain HTTP request to any host but loopback:
// whatever sends it there (a redirect, a token realm), credentials and
// content never cross a network in clear.
type loopbackOnlyHTTP struct{ next http.RoundTripper }

func (l loopbackOnlyHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(Reference{Host: req.URL.Host}).Loopback() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &Error{Reason: ReasonForbidden, Err: fmt.Errorf("refused plain HTTP to %s: only a loopback registry may be reached without TLS", req.URL.Host)}
	}
	return l.next.RoundTrip(req)
}

// Resolve asks the registry which manifest ref (a tag or a digest) names:
// one HEAD request (and the token flow's, when a token has to be earned).
func (c *Client) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	repo, err := c.repository()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, err := repo.Resolve(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, classify(fmt.Errorf("resolve %s:%s: %w", c.ref, ref, err))
	}
	if !IsDigest(desc.Digest.String()) {
		return ocispec.Descriptor{}, invalidf("%s:%s resolves to %q: recond reads sha256 digests only", c.ref, ref, desc.Digest)
	}
	if strings.HasPrefix(ref, "sha256:") && desc.Digest.String() != ref {
		return ocispec.Descriptor{}, invalidf("%s@%s: the registry answered with digest %s", c.ref, ref, desc.Digest)
	}
	return desc, nil
}

// Manifest fetches the manifest desc names (at most max bytes, and never
// more than MaxManifestBytes, checked before it is read) and verifies its
// size and digest.
func (c *Client) Manifest(ctx context.Context, desc ocispec.Descriptor, max int64) ([]byte, error) {
	max = min(max, MaxManifestBytes)
	if desc.Size < 0 || desc.Size > max {
		return nil, invalidf("manifest %s: %d bytes, more than the %d a manifest may have (--render-max-file-bytes, at most %d)", desc.Digest, desc.Size, max, MaxManifestBytes)
	}
	repo, err := c.repository()
	if err != nil {
		return nil, err
	}
	rc, err := repo.Manifests().Fetch(ctx, desc)
	if err != nil {
		return nil, classify(fmt.Errorf("fetch manifest %s: %w", desc.Digest, err))
	}
	defer rc.Close()
	b, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, c.readError(ctx, "manifest", desc, err)
	}
	return b, nil
}

// Blob copies the blob desc names into w, refusing one of more than max
// bytes before it is read, and verifies its size and digest as it goes:
// what w received is the blob only when Blob returns nil.
func (c *Client) Blob(ctx context.Context, desc ocispec.Descriptor, max int64, w io.Writer) error {
	if desc.Size < 0 || desc.Size > max {
		return invalidf("layer %s: %d bytes, more than --render-max-bytes (%d)", desc.Digest, desc.Size, max)
	}
	repo, err := c.repository()
	if err != nil {
		return err
	}
	rc, err := repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return classify(fmt.Errorf("fetch layer %s: %w", desc.Digest, err))
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, desc)
	if _, err := io.Copy(w, vr); err != nil {
		return c.readError(ctx, "layer", desc, err)
	}
	if err := vr.Verify(); err != nil {
		return c.readError(ctx, "layer", desc, err)
	}
	return nil
}

// readError is a body that broke off (the network's, or a stop) or does
// not match its descriptor (the registry served something else: invalid).
func (c *Client) readError(ctx context.Context, what string, desc ocispec.Descriptor, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return withoutQueries(err)
	case ctx.Err() != nil:
		return classify(fmt.Errorf("read %s %s: %w", what, desc.Digest, ctx.Err()))
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData):
		return invalidf("%s %s: what the registry served does not match its digest and size: %v", what, desc.Digest, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Reason: ReasonUnavailable, Err: withoutQueries(fmt.Errorf("read %s %s: the body broke off: %w", what, desc.Digest, err))}
	}
	return classify(fmt.Errorf("read %s %s: %w", what, desc.Digest, err))
}

// Repository is oras's view of the repository, with the credentials and
// CA of now: what a signature check reads through.
func (c *Client) Repository() (*remote.Repository, error) { return c.repository() }
