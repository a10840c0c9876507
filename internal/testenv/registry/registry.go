package registry

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"recond.dev/recond/internal/testenv/tinyca"
	"recond.dev/recond/internal/testenv/tools"
)

// Options chooses how a test registry authenticates and what
// stands in front of it.
type Options struct {
	// TLS makes the registry (and the token server, the front and the
	// redirect listener) serve HTTPS with a certificate for 127.0.0.1
	// signed by a CA made for this registry (Registry.CAFile).
	TLS bool
	// Users are the accounts (name -> password). Without Token they are
	// the registry's htpasswd basic auth (bcrypt); with Token the token
	// server checks them. Empty: no basic auth, and a token server gives a
	// token to anyone.
	Users map[string]string
	// Token makes the registry ask for bearer tokens (distribution's
	// `auth.token`) from a token server on 127.0.0.1, which answers an
	// ES256 JWT for valid basic credentials and 401 otherwise.
	Token bool
	// Front puts a reverse proxy in front of the registry: Host is then the
	// front's, Requests are recorded there exactly, and Fail and
	// RedirectBlobs work.
	Front bool
}

// Registry is a real OCI registry for tests: Debian's docker-registry
// (CNCF distribution 2.8) on 127.0.0.1 with filesystem storage in a
// temporary directory and no cache in memory, so that what a test changes
// in the storage (DeleteTag, BlobPath) is what the registry serves.
type Registry struct {
	// Host is the "127.0.0.1:PORT" clients use (the front's when Front).
	Host string
	// CAFile is the PEM file of the CA that signed the serving certificate
	// when TLS, "" otherwise.
	CAFile string

	t       testing.TB
	opts    Options
	bin     string
	dir     string // configuration, certificates, log
	root    string // the storage's rootdirectory
	config  string // the configuration file
	addr    string // the registry's own 127.0.0.1:PORT
	scheme  string // http or https
	ca      *tinyca.CA
	serving tinyca.Pair // for 127.0.0.1: registry, front, redirect listener, token server
	signing tinyca.Pair // the token server's
	user    string      // the first user (by name), whom the pushes use
	pass    string
	direct  *http.Client // to the registry itself, trusting the CA
	token   *tokenServer
	front   *registryFront
	logf    *os.File

	mu   sync.Mutex
	proc *registryProc

	logMu   sync.Mutex
	served  []string        // access-log requests under /v2 since the last reset
	synced  map[string]bool // sync markers seen in the access log
	syncs   int
	partial []byte // an access-log line not yet ended
}

// registryProc is one run of the registry process.
type registryProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a registry with opts and stops it when the test ends. The
// binary is tools.Registry: $REGISTRY_BIN, or docker-registry from PATH;
// the test is skipped when there is none (`make registry` installs it).
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := tools.Find(t, tools.Registry)
	ca, err := tinyca.New("recond test registry CA")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert()
	if err != nil {
		t.Fatal(err)
	}
	signing, err := ca.SigningCert(tokenIssuer)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &Registry{
		t:       t,
		opts:    opts,
		bin:     bin,
		dir:     dir,
		root:    filepath.Join(dir, "storage"),
		config:  filepath.Join(dir, "config.json"),
		scheme:  "http",
		ca:      ca,
		serving: serving,
		signing: signing,
		synced:  map[string]bool{},
	}
	if opts.TLS {
		r.scheme = "https"
		r.CAFile = filepath.Join(dir, "ca.pem")
		r.writeFile(r.CAFile, ca.CertPEM())
		r.writeFile(filepath.Join(dir, "server.pem"), serving.CertPEM())
		r.writeFile(filepath.Join(dir, "server-key.pem"), serving.KeyPEM())
	}
	if len(opts.Users) > 0 {
		names := make([]string, 0, len(opts.Users))
		for name := range opts.Users {
			names = append(names, name)
		}
		slices.Sort(names)
		r.user, r.pass = names[0], opts.Users[names[0]]
	}
	r.direct = r.HTTPClient()
	if r.logf, err = os.Create(filepath.Join(dir, "registry.log")); err != nil {
		t.Fatal(err)
	}
	if opts.Token {
		r.writeFile(filepath.Join(dir, "token-ca.pem"), ca.CertPEM())
		r.token = startTokenServer(serving, signing, opts.Users, opts.TLS)
		t.Cleanup(r.token.srv.Close)
	} else if len(opts.Users) > 0 {
		r.writeHtpasswd()
	}

	t.Cleanup(func() {
		r.Stop()
		r.logf.Close()
	})
	// A port found free may be taken before the registry binds it: try
	// another then.
	for attempt := 0; ; attempt++ {
		r.addr = fmt.Sprintf("127.0.0.1:%d", tools.FreePorts(t, 1)[0])
		r.writeConfig()
		err := r.start(10 * time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, errAddrInUse) || attempt == 4 {
			t.Fatal(err)
		}
	}
	r.Host = r.addr
	if opts.Front {
		r.front = startRegistryFront(t, r)
		r.Host = r.front.addr
	}
	r.ResetRequests()
	return r
}

// writeFile writes data into path, failing the test on error.
func (r *Registry) writeFile(path string, data []byte) {
	r.t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// writeHtpasswd writes the users' bcrypt hashes where the configuration
// points auth.htpasswd.
func (r *Registry) writeHtpasswd() {
	r.t.Helper()
	var b strings.Builder
	for name, pass := range r.opts.Users {
		if strings.ContainsAny(name, ":\n") {
			r.t.Fatalf("registry user %q: a name with ':' or a newline cannot be in an htpasswd file", name)
		}
		h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			r.t.Fatalf("bcrypt the password of registry user %q: %v", name, err)
		}
		fmt.Fprintf(&b, "%s:%s\n", name, h)
	}
	r.writeFile(filepath.Join(r.dir, "htpasswd"), []byte(b.String()))
}

// writeConfig writes the registry's configuration (JSON, which
// distribution's YAML parser reads).
func (r *Registry) writeConfig() {
	r.t.Helper()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	httpCfg := map[string]any{
		"addr":    r.addr,
		"secret":  hex.EncodeToString(secret),
		"headers": map[string]any{"X-Content-Type-Options": []string{"nosniff"}},
	}
	if r.opts.TLS {
		httpCfg["tls"] = map[string]any{
			"certificate": filepath.Join(r.dir, "server.pem"),
			"key":         filepath.Join(r.dir, "server-key.pem"),
		}
	}
	cfg := map[string]any{
		"version": "0.1",
		"log": map[string]any{
			"level":     "info",
			"formatter": "text",
			"accesslog": map[string]any{"disabled": false},
		},
		// No storage.cache: the registry reads tags and blobs from the
		// filesystem on every request.
		"storage": map[string]any{
			"filesystem":  map[string]any{"rootdirectory": r.root},
			"delete":      map[string]any{"enabled": true},
			"maintenance": map[string]any{"uploadpurging": map[string]any{"enabled": false}},
		},
		"http": httpCfg,
	}
	switch {
	case r.opts.Token:
		cfg["auth"] = map[string]any{"token": map[string]any{
			"realm":          r.token.realm(),
			"service":        tokenService,
			"issuer":         tokenIssuer,
			"rootcertbundle": filepath.Join(r.dir, "token-ca.pem"),
		}}
	case len(r.opts.Users) > 0:
		cfg["auth"] = map[string]any{"htpasswd": map[string]any{
			"realm": "recond-test-registry",
			"path":  filepath.Join(r.dir, "htpasswd"),
		}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		r.t.Fatal(err)
	}
	r.writeFile(r.config, b)
}

var errAddrInUse = errors.New("address already in use")

// start runs the registry and waits until it answers GET /v2/ (200, or 401
// when auth is on). It returns errAddrInUse when the process exited because
// its port was taken.
func (r *Registry) start(timeout time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return nil
	}
	start := time.Now()
	fmt.Fprintf(r.logf, "--- start %s on %s\n", r.bin, r.addr)
	cmd := exec.Command(r.bin, "serve", r.config)
	cmd.Dir = r.dir
	// An environment of its own: distribution reads REGISTRY_* variables
	// as configuration.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.dir, "TMPDIR=" + r.dir, "LANG=C"}
	cmd.Stdout = registryStdout{r}
	cmd.Stderr = r.logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.bin, err)
	}
	p := &registryProc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	for {
		err := r.ping()
		if err == nil {
			r.proc = p
			return nil
		}
		select {
		case <-p.exited:
			log := r.logTail()
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("registry on %s: %w", r.addr, errAddrInUse)
			}
			return fmt.Errorf("registry on %s exited before it was ready (%v):\n%s", r.addr, cmd.ProcessState, log)
		default:
		}
		if time.Since(start) > timeout {
			_ = cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("registry on %s not ready after %s (%v):\n%s", r.addr, timeout, err, r.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingQuery marks the readiness requests, which Requests leaves out.
const pingQuery = "_testenv=ping"

// ping is GET /v2/ on the registry itself.
func (r *Registry) ping() error {
	resp, err := r.direct.Get(r.scheme + "://" + r.addr + "/v2/?" + pingQuery)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}

// logTail is the end of the registry's log, for failure messages.
func (r *Registry) logTail() string {
	b, _ := os.ReadFile(r.logf.Name())
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// Stop stops the registry process (SIGTERM, then SIGKILL after 5 s); its
// storage is kept. Connections to the registry's port are then refused
// (with Front, the front answers 502). No-op when stopped.
func (r *Registry) Stop() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Start starts the registry again on the same port and storage. No-op
// when running.
func (r *Registry) Start() {
	r.t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = r.start(10 * time.Second); err == nil || !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("restart the registry: %v", err)
	}
}

// URL is the registry's base URL as clients use it: http:// or https://
// and Host.
func (r *Registry) URL() string { return r.scheme + "://" + r.Host }

// RootCAs is the pool of the registry's CA (empty without TLS).
func (r *Registry) RootCAs() *x509.CertPool {
	if !r.opts.TLS {
		return x509.NewCertPool()
	}
	return r.ca.Pool()
}

// HTTPClient is an HTTP client that trusts the registry's CA and sends no
// credentials.
func (r *Registry) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: r.RootCAs(), MinVersion: tls.VersionTLS12}
	tr.Proxy = nil
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// Repository is an oras-go client of repo on Host that trusts the CA and
// authenticates as the first user (by name) when the registry has users.
func (r *Registry) Repository(t testing.TB, repo string) *remote.Repository {
	t.Helper()
	return r.RepositoryAs(t, repo, r.user, r.pass)
}

// RepositoryAs is Repository authenticating as user with password (none
// when user is "").
func (r *Registry) RepositoryAs(t testing.TB, repo, user, password string) *remote.Repository {
	t.Helper()
	return r.repository(t, r.Host, repo, user, password)
}

// repository is an oras-go client of repo on host.
func (r *Registry) repository(t testing.TB, host, repo, user, password string) *remote.Repository {
	t.Helper()
	rep, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		t.Fatalf("repository %q: %v", repo, err)
	}
	rep.PlainHTTP = !r.opts.TLS
	c := &auth.Client{Client: r.HTTPClient(), Cache: auth.NewCache()}
	if user != "" {
		c.Credential = auth.StaticCredential(host, auth.Credential{Username: user, Password: password})
	}
	rep.Client = c
	return rep
}

// DockerConfig writes a Docker config file ({"auths": {Host: {"auth":
// base64(user:password)}}}, the content of a kubernetes.io/dockerconfigjson
// Secret and what `helm --registry-config` reads) and returns its path.
func (r *Registry) DockerConfig(t testing.TB, user, password string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"auths": map[string]any{
		r.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "dockerconfig-*.json")
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("write the docker config: %v", err)
	}
	return f.Name()
}

// storagePath is a path under the registry's storage.
func (r *Registry) storagePath(elem ...string) string {
	return filepath.Join(append([]string{r.root, "docker", "registry", "v2"}, elem...)...)
}

// DeleteTag removes tag from repo. Distribution 2.8 cannot delete a tag
// over its API, so the tag's directory is removed from the storage; with
// no cache configured the registry answers 404 for it at once.
func (r *Registry) DeleteTag(t testing.TB, repo, tag string) {
	t.Helper()
	dir := r.storagePath("repositories", filepath.FromSlash(repo), "_manifests", "tags", tag)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("delete tag %s:%s: %v", repo, tag, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("delete tag %s:%s: %v", repo, tag, err)
	}
}

// BlobPath is the data file of the blob digest ("sha256:...") in the
// storage, for a test to damage or remove.
func (r *Registry) BlobPath(digest string) string {
	algo, hexd, ok := strings.Cut(digest, ":")
	if !ok || len(hexd) < 2 {
		r.t.Fatalf("blob path of %q: not a digest", digest)
	}
	return r.storagePath("blobs", algo, hexd[:2], hexd, "data")
}

// Tag points tag of repo at the manifest digest, which the registry must
// have (a revert, a retag).
func (r *Registry) Tag(t testing.TB, repo, digest, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := r.Repository(t, repo)
	desc, err := rep.Resolve(ctx, digest)
	if err != nil {
		t.Fatalf("tag %s:%s: resolve %s: %v", repo, tag, digest, err)
	}
	if err := rep.Tag(ctx, desc, tag); err != nil {
		t.Fatalf("tag %s:%s as %s: %v", repo, tag, digest, err)
	}
}

// accessLine matches a request in the registry's access log (combined log
// format, on its stdout).
var accessLine = regexp.MustCompile(`^\S+ \S+ \S+ \[[^\]]*\] "([A-Z]+) ([^ "]+) HTTP/[0-9.]+"`)

// syncPrefix is the path of the marker requests Requests makes to know
// the registry has logged every request before them.
const syncPrefix = "/_testenv/sync/"

// registryStdout parses the registry's access log as it is written.
type registryStdout struct{ r *Registry }

func (w registryStdout) Write(p []byte) (int, error) {
	r := w.r
	_, _ = r.logf.Write(p)
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		line := string(r.partial[:i])
		r.partial = r.partial[i+1:]
		m := accessLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		path, query, _ := strings.Cut(m[2], "?")
		switch {
		case query == pingQuery:
		case strings.HasPrefix(path, syncPrefix):
			r.synced[path] = true
		case path == "/v2" || strings.HasPrefix(path, "/v2/"):
			r.served = append(r.served, m[1]+" "+path)
		}
	}
	return len(p), nil
}

// syncLog makes a marker request and waits until it is in the access log,
// and so every request answered before it. It gives up after 5 s, or at
// once when the registry is stopped.
func (r *Registry) syncLog() {
	r.mu.Lock()
	running := r.proc != nil
	r.mu.Unlock()
	r.logMu.Lock()
	r.syncs++
	path := fmt.Sprintf("%s%d", syncPrefix, r.syncs)
	r.logMu.Unlock()
	if !running {
		return
	}
	resp, err := r.direct.Get(r.scheme + "://" + r.addr + path)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		r.logMu.Lock()
		seen := r.synced[path]
		delete(r.synced, path)
		r.logMu.Unlock()
		if seen {
			return
		}
	}
}

// Requests is "METHOD /v2/PATH" (no query) of every request the registry
// was sent since the last ResetRequests, in order. With Front they are
// recorded by the front as they arrive, including those it answers itself
// (Fail, blob redirects), and the list is exact; otherwise they come from
// the registry's access log, which Requests first makes sure is written up
// to the call.
func (r *Registry) Requests() []string {
	if r.front != nil {
		return r.front.requests()
	}
	r.syncLog()
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return slices.Clone(r.served)
}

// ResetRequests forgets the requests recorded so far (and, with Front,
// whether the redirect listener saw an Authorization header).
func (r *Registry) ResetRequests() {
	if r.front != nil {
		r.front.reset()
		return
	}
	r.syncLog()
	r.logMu.Lock()
	r.served = nil
	r.logMu.Unlock()
}

// TokenRequests is how many requests the token server answered (0
// without Token).
func (r *Registry) TokenRequests() int {
	if r.token == nil {
		return 0
	}
	return int(r.token.requests.Load())
}

// needFront fails the test when the registry has no front.
func (r *Registry) needFront(what string) *registryFront {
	r.t.Helper()
	if r.front == nil {
		r.t.Fatalf("%s needs a registry started with Options.Front", what)
	}
	return r.front
}

// Fail makes the front answer every /v2/ request with status (and a
// distribution error body) until Fail(0). Needs Front.
func (r *Registry) Fail(status int) {
	r.t.Helper()
	f := r.needFront("Fail")
	f.mu.Lock()
	f.fail = status
	f.mu.Unlock()
}

// RedirectBlobs makes the front answer an authorized blob GET with a 307
// to a second listener on 127.0.0.1 (another port, so another origin),
// which serves the blob, fetched from the registry, to anyone, as a
// storage backend's signed URL would. Needs Front.
func (r *Registry) RedirectBlobs() {
	r.t.Helper()
	f := r.needFront("RedirectBlobs")
	f.mu.Lock()
	f.redirect = true
	f.mu.Unlock()
}

// RedirectSawAuth reports whether any request to the redirect listener
// since the last ResetRequests carried an Authorization header: a client
// that leaks the registry's credentials to another origin. Needs Front.
func (r *Registry) RedirectSawAuth() bool {
	r.t.Helper()
	f := r.needFront("RedirectSawAuth")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sawAuth
}

// RedirectHits is how many requests the redirect listener answered since
// the last ResetRequests. Needs Front.
func (r *Registry) RedirectHits() int {
	r.t.Helper()
	f := r.needFront("RedirectHits")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.redirectHits
}
