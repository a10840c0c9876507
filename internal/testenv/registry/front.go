package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote/auth"

	"recond.dev/recond/internal/testenv/tinyca"
)

// registryFront is a reverse proxy in front of a test registry: it records
// every request, answers them all with an error on demand (Fail) and
// redirects blob downloads to another origin (RedirectBlobs).
type registryFront struct {
	r        *Registry
	srv      *httptest.Server
	addr     string
	proxy    *httputil.ReverseProxy
	backend  *http.Client // to the registry itself, for the redirect's check
	redirSrv *httptest.Server
	fetch    *auth.Client // the redirect listener's client of the registry

	mu           sync.Mutex
	reqs         []string
	fail         int
	redirect     bool
	sawAuth      bool
	redirectHits int
}

// blobGet matches the path of a blob download (not an upload).
var blobGet = regexp.MustCompile(`^/v2/(.+)/blobs/([a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+)$`)

// startRegistryFront serves the front on 127.0.0.1 (HTTPS with the
// registry's certificate when TLS) and the redirect listener on another
// port; both close when the test ends.
func startRegistryFront(t testing.TB, r *Registry) *registryFront {
	t.Helper()
	target := &url.URL{Scheme: r.scheme, Host: r.addr}
	tr := r.HTTPClient().Transport.(*http.Transport)
	// Pass the client's Accept-Encoding through as it is, and the answer.
	tr.DisableCompression = true
	f := &registryFront{r: r, backend: &http.Client{Transport: tr, Timeout: time.Minute}}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The registry builds its Location headers (uploads) from the
			// Host it is sent: keep the front's, so that clients stay on it.
			pr.Out.Host = pr.In.Host
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeRegistryError(w, http.StatusBadGateway, fmt.Sprintf("the registry behind the front is unreachable: %v", err))
		},
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.redirSrv = httptest.NewUnstartedServer(http.HandlerFunc(f.serveRedirected))
	if r.opts.TLS {
		f.srv.TLS = tinyca.ServerTLS(r.serving)
		f.srv.StartTLS()
		f.redirSrv.TLS = tinyca.ServerTLS(r.serving)
		f.redirSrv.StartTLS()
	} else {
		f.srv.Start()
		f.redirSrv.Start()
	}
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.redirSrv.Close)
	f.addr = f.srv.Listener.Addr().String()
	f.fetch = &auth.Client{Client: r.HTTPClient(), Cache: auth.NewCache()}
	if r.user != "" {
		f.fetch.Credential = auth.StaticCredential(r.addr, auth.Credential{Username: r.user, Password: r.pass})
	}
	return f
}

func (f *registryFront) serve(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	if strings.HasPrefix(req.URL.Path, "/v2") {
		f.reqs = append(f.reqs, req.Method+" "+req.URL.Path)
	}
	fail, redirect := f.fail, f.redirect
	f.mu.Unlock()
	if fail != 0 && strings.HasPrefix(req.URL.Path, "/v2") {
		writeRegistryError(w, fail, "failure injected by the test registry's front")
		return
	}
	if redirect && req.Method == http.MethodGet && blobGet.MatchString(req.URL.Path) && f.authorized(req) {
		loc := *f.redirURL()
		loc.Path = req.URL.Path
		loc.RawQuery = "expires=" + fmt.Sprint(time.Now().Add(time.Hour).Unix())
		w.Header().Set("Location", loc.String())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	f.proxy.ServeHTTP(w, req)
}

// authorized asks the registry, with a HEAD carrying the request's
// headers, whether it would serve the blob: as a registry does, the front
// redirects authorized requests only; the others it proxies, so that the
// client gets the registry's own answer (401, 404).
func (f *registryFront) authorized(req *http.Request) bool {
	u := url.URL{Scheme: f.r.scheme, Host: f.r.addr, Path: req.URL.Path}
	head, err := http.NewRequestWithContext(req.Context(), http.MethodHead, u.String(), nil)
	if err != nil {
		return false
	}
	head.Header = req.Header.Clone()
	head.Host = req.Host
	resp, err := f.backend.Do(head)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// redirURL is the redirect listener's base URL.
func (f *registryFront) redirURL() *url.URL {
	u, _ := url.Parse(f.redirSrv.URL)
	return u
}

// serveRedirected serves a blob download redirected by the front: it
// records whether the client sent an Authorization header, then streams the
// blob from the registry, fetched with the registry's first user.
func (f *registryFront) serveRedirected(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	f.redirectHits++
	if req.Header.Get("Authorization") != "" {
		f.sawAuth = true
	}
	f.mu.Unlock()
	m := blobGet.FindStringSubmatch(req.URL.Path)
	if m == nil || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		http.Error(w, "the redirect listener serves blob downloads only", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
	defer cancel()
	u := url.URL{Scheme: f.r.scheme, Host: f.r.addr, Path: req.URL.Path}
	get, err := http.NewRequestWithContext(ctx, req.Method, u.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if rng := req.Header.Get("Range"); rng != "" {
		get.Header.Set("Range", rng)
	}
	// The scope the registry's token auth needs for the blob.
	ctx = auth.AppendScopesForHost(ctx, f.r.addr, auth.ScopeRepository(m[1], auth.ActionPull))
	resp, err := f.fetch.Do(get.WithContext(ctx))
	if err != nil {
		http.Error(w, fmt.Sprintf("fetch the blob from the registry: %v", err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "Docker-Content-Digest", "ETag"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// requests is what the front recorded since the last reset.
func (f *registryFront) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// reset forgets the requests and what the redirect listener saw.
func (f *registryFront) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = nil
	f.sawAuth = false
	f.redirectHits = 0
}

// writeRegistryError answers status with a body in the distribution API's
// error format.
func writeRegistryError(w http.ResponseWriter, status int, msg string) {
	code := "UNAVAILABLE"
	switch status {
	case http.StatusUnauthorized:
		code = "UNAUTHORIZED"
	case http.StatusForbidden:
		code = "DENIED"
	case http.StatusNotFound:
		code = "NAME_UNKNOWN"
	case http.StatusTooManyRequests:
		code = "TOOMANYREQUESTS"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`+"\n", code, msg)
}
