package faults

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv/registry"
)

// The registry rows of the fault matrix: the registry down, answering
// errors, hanging or refusing the credentials, the followed tag deleted or
// moved back to an older artifact, and a damaged or deleted artifact
// cache. Every registry is a real one (registry.Start: CNCF
// distribution over plain HTTP on 127.0.0.1, so recond runs with
// --oci-insecure), every artifact is pushed as `flux push artifact` does,
// with the manifests under gitManifests (--path), and recond follows a tag
// with its default --observe watch. The functions of the Git rows
// (git_test.go) compare the live objects and read the ticks.

// regRepo is the repository every row pushes to.
const regRepo = "apps/web"

// regAt accepts a successful tick at the manifest digest (the tick line
// carries it cut: "sha256:" and 12 hex digits).
func regAt(digest string) func(Tick) bool {
	return func(t Tick) bool {
		rev := t.Str("revision")
		return !t.Failed() && strings.HasPrefix(rev, "sha256:") && strings.HasPrefix(digest, rev)
	}
}

// startReg starts recond on tag of regRepo at host, with the manifests of
// gitManifests, and waits until it converged; it returns the converged
// tick.
func startReg(t *testing.T, host, tag, ns string, extra ...string) (*Recond, Tick) {
	t.Helper()
	args := append(Base(t, "oci://"+host+"/"+regRepo, ns, Kubeconfig(t)),
		"--ref", tag, "--path", gitManifests, "--oci-insecure")
	r := StartRecond(t, append(args, extra...)...)
	first := r.WaitTick(60*time.Second, 0, Succeeded)
	return r, r.WaitTick(30*time.Second, first.ID, Converged)
}

// regBlobGets counts the blob downloads among requests (the registry's
// Requests): a pull, as recond makes one, is the manifest and one blob.
func regBlobGets(requests []string) int {
	n := 0
	for _, req := range requests {
		if strings.HasPrefix(req, "GET /v2/"+regRepo+"/blobs/") {
			n++
		}
	}
	return n
}

// TestFaultRegistryDown: the registry goes away (connection refused) and
// comes back on the same address and storage. Nothing can be pushed while
// it is down: the push that follows its return is applied on the first
// tick after it.
func TestFaultRegistryDown(t *testing.T) {
	cp.Require(t)
	reg := registry.Start(t, registry.Options{})
	d1 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
	ns := cp.Namespace(t)
	r, ok := startReg(t, reg.Host, "latest", ns)
	if !regAt(d1)(ok) {
		t.Fatalf("converged %s at %s, want %s", ok, ok.Str("revision"), d1)
	}
	f := expectFault(t, r, ok, ns, "read", "unavailable")
	before := f.before

	reg.Stop()
	last := f.holds(t, 20*time.Second)
	if !strings.Contains(last.Error, "connection refused") {
		t.Errorf("error %q does not say connection refused", last.Error)
	}

	reg.Start()
	r.Recovery("registry down", time.Now(), last.ID, 2, 20*time.Second, regAt(d1))
	gitCheckUntouched(t, ns, before)
	back := r.LastTick()
	pushed := time.Now()
	d2 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v2"))
	r.Recovery("registry down: push after its return", pushed, back.ID, 2, 20*time.Second, regAt(d2))
	if got := gitLive(t, ns)["cm-00"]; got.Value != "v2" || got.UID != before["cm-00"].UID {
		t.Errorf("cm-00 = %+v after the push, want the same object (uid %s) at v2", got, before["cm-00"].UID)
	}
}

// TestFaultRegistryErrors: the registry answers every request with an
// error status (the front in front of it does). The tick fails in read,
// reason unavailable, and nothing is written; once the registry answers
// again the next tick succeeds, and a push after it is applied.
func TestFaultRegistryErrors(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			cp.Require(t)
			reg := registry.Start(t, registry.Options{Front: true})
			d1 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
			ns := cp.Namespace(t)
			r, ok := startReg(t, reg.Host, "latest", ns)
			f := expectFault(t, r, ok, ns, "read", "unavailable")

			reg.Fail(code)
			last := f.holds(t, 20*time.Second)
			if !strings.Contains(last.Error, fmt.Sprint(code)) {
				t.Errorf("error %q does not name the status %d", last.Error, code)
			}

			reg.Fail(0)
			r.Recovery(fmt.Sprintf("registry answers %d", code), time.Now(), last.ID, 2, 20*time.Second, regAt(d1))
			back := r.LastTick()
			pushed := time.Now()
			d2 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v2"))
			r.Recovery(fmt.Sprintf("registry answers %d: push after", code), pushed, back.ID, 2, 20*time.Second, regAt(d2))
		})
	}
}

// hangProxy is a plain TCP listener in front of a registry: it forwards
// each connection to the registry, or, while hanging, accepts it and holds
// it without ever answering (what it is sent is read and dropped).
type hangProxy struct {
	ln     net.Listener
	target string
	hang   atomic.Bool
	held   atomic.Int64 // connections accepted and held

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// startHangProxy listens on 127.0.0.1 and forwards to target
// (host:port); it closes everything when the test ends.
func startHangProxy(t *testing.T, target string) *hangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	return p
}

// Host is the proxy's 127.0.0.1:PORT.
func (p *hangProxy) Host() string { return p.ln.Addr().String() }

func (p *hangProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *hangProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *hangProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c, true)
		if p.hang.Load() {
			p.held.Add(1)
			go func() {
				_, _ = io.Copy(io.Discard, c) // until the client gives up
				c.Close()
				p.track(c, false)
			}()
			continue
		}
		go p.forward(c)
	}
}

func (p *hangProxy) forward(c net.Conn) {
	defer p.track(c, false)
	defer c.Close()
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(b, true)
	defer p.track(b, false)
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
}

// Hang makes the proxy hold every new connection, and closes the ones it
// forwards: a client's kept-alive connection cannot reach the registry
// either.
func (p *hangProxy) Hang() {
	p.hang.Store(true)
	p.closeAll()
}

// Release makes the proxy forward new connections again.
func (p *hangProxy) Release() { p.hang.Store(false) }

// TestFaultRegistryHangs: the registry's address accepts connections and
// never answers (a TCP listener holding them); each tick ends at
// --tick-timeout with reason timeout and the next one starts on time.
func TestFaultRegistryHangs(t *testing.T) {
	cp.Require(t)
	reg := registry.Start(t, registry.Options{})
	reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
	proxy := startHangProxy(t, reg.Host)
	ns := cp.Namespace(t)
	const tickTimeout = 2 * time.Second
	r, ok := startReg(t, proxy.Host(), "latest", ns, "--interval", "2s", "--tick-timeout", tickTimeout.String())
	f := expectFault(t, r, ok, ns, "read", "timeout")

	proxy.Hang()
	// Pushed to the registry itself: only recond's way to it hangs.
	d2 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v2"))
	last := f.holds(t, 30*time.Second)
	if proxy.held.Load() == 0 {
		t.Error("the hanging listener held no connection: the ticks did not fail on it")
	}
	checkHungTicks(t, r, ok.ID, tickTimeout, "request")

	proxy.Release()
	r.Recovery("registry hangs", time.Now(), last.ID, 2, 30*time.Second, regAt(d2))
}

// writeAtomically replaces path with data, as a Secret volume is updated
// (a new file renamed into place): a reader sees the old or the new file.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFaultRegistryAuth: the credentials recond has stop being accepted
// (the file rotated to a wrong password, or to one without the registry,
// or the registry denying the pull): reason auth, nothing written, until
// the file holds the right ones again, which recond reads at every request
// batch, or the registry grants the pull again. No password reaches the
// log.
func TestFaultRegistryAuth(t *testing.T) {
	const user, pass, wrong = "deployer", "right-Pa55word-registry", "wrong-Pa55word-registry"
	users := map[string]string{user: pass}
	tests := []struct {
		name string
		opts registry.Options
		// fault turns the fault on (creds is recond's credentials file);
		// fix turns it off. push tells whether an artifact can be pushed
		// while the fault is on.
		fault, fix func(t *testing.T, reg *registry.Registry, creds string)
		push       bool
	}{
		{
			name: "401 basic", opts: registry.Options{Users: users}, push: true,
			fault: func(t *testing.T, reg *registry.Registry, creds string) { regCredsAs(t, reg, creds, user, wrong) },
			fix:   func(t *testing.T, reg *registry.Registry, creds string) { regCredsAs(t, reg, creds, user, pass) },
		},
		{
			name: "401 token", opts: registry.Options{Users: users, Token: true}, push: true,
			fault: func(t *testing.T, reg *registry.Registry, creds string) { regCredsAs(t, reg, creds, user, wrong) },
			fix:   func(t *testing.T, reg *registry.Registry, creds string) { regCredsAs(t, reg, creds, user, pass) },
		},
		{
			name: "no credentials for the registry", opts: registry.Options{Users: users}, push: true,
			fault: func(t *testing.T, reg *registry.Registry, creds string) {
				writeAtomically(t, creds, []byte(`{"auths":{"registry.example.com":{"auth":"`+
					base64.StdEncoding.EncodeToString([]byte(user+":"+pass))+`"}}}`))
			},
			fix: func(t *testing.T, reg *registry.Registry, creds string) { regCredsAs(t, reg, creds, user, pass) },
		},
		{
			name: "403", opts: registry.Options{Users: users, Front: true},
			fault: func(t *testing.T, reg *registry.Registry, creds string) { reg.Fail(http.StatusForbidden) },
			fix:   func(t *testing.T, reg *registry.Registry, creds string) { reg.Fail(0) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp.Require(t)
			reg := registry.Start(t, tt.opts)
			d := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
			creds := reg.DockerConfig(t, user, pass)
			ns := cp.Namespace(t)
			r, ok := startReg(t, reg.Host, "latest", ns, "--oci-credentials-file", creds)
			before := gitLive(t, ns)
			f0 := gitFailures(r, "read", "auth")

			tt.fault(t, reg, creds)
			// Pushed once the fault holds: no tick in flight with the old
			// credentials can see it.
			first := r.WaitTick(20*time.Second, ok.ID, FailedIn("read", "auth"))
			t.Logf("during the fault: %s", first)
			if tt.push {
				d = reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v2"))
			}
			last := gitFaultOn(t, r, first.ID, f0+1, "read", "auth", 20*time.Second)
			gitCheckNoWrites(t, r, ok.ID)
			gitCheckUntouched(t, ns, before)

			tt.fix(t, reg, creds)
			r.Recovery("registry auth "+tt.name, time.Now(), last.ID, 2, 20*time.Second, regAt(d))
			log := r.Log()
			for _, secret := range []string{pass, wrong,
				base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)),
				base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong))} {
				if strings.Contains(log, secret) {
					t.Errorf("the log contains the secret %q", secret)
				}
			}
		})
	}
}

// regCredsAs rewrites the credentials file creds with user and password
// for the registry.
func regCredsAs(t *testing.T, reg *registry.Registry, creds, user, password string) {
	t.Helper()
	b, err := os.ReadFile(reg.DockerConfig(t, user, password))
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, creds, b)
}

// TestFaultRegistryTagDeleted: the followed tag is deleted, then pushed
// again at a new digest.
func TestFaultRegistryTagDeleted(t *testing.T) {
	cp.Require(t)
	reg := registry.Start(t, registry.Options{})
	reg.PushFluxArtifact(t, regRepo, "release", gitFiles(3, "v1"))
	ns := cp.Namespace(t)
	r, ok := startReg(t, reg.Host, "release", ns)
	f := expectFault(t, r, ok, ns, "read", "not_found")

	reg.DeleteTag(t, regRepo, "release")
	last := f.holds(t, 20*time.Second)
	if !strings.Contains(last.Error, "release") {
		t.Errorf("error %q does not name the tag", last.Error)
	}

	pushed := time.Now()
	d2 := reg.PushFluxArtifact(t, regRepo, "release", gitFiles(3, "v2"))
	r.Recovery("registry tag deleted", pushed, last.ID, 2, 20*time.Second, regAt(d2))
	if got, before := gitLive(t, ns), f.before; got["cm-02"].UID != before["cm-02"].UID || got["cm-02"].Value != "v2" {
		t.Errorf("cm-02 = %+v, want the same object (uid %s) at v2", got["cm-02"], before["cm-02"].UID)
	}
}

// TestFaultRegistryTagMovedBack: the tag is moved back to an older digest
// (a revert). This is not a fault of recond: the tag is the desired state,
// so recond applies the older artifact, which it still has in its cache
// (no blob is downloaded), and prunes what the newer had and the older
// has not.
func TestFaultRegistryTagMovedBack(t *testing.T) {
	cp.Require(t)
	reg := registry.Start(t, registry.Options{Front: true})
	d1 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
	ns := cp.Namespace(t)
	r, ok := startReg(t, reg.Host, "latest", ns)

	d2 := reg.PushFluxArtifact(t, regRepo, "latest", map[string]string{
		gitManifests + "/cm-01.yaml": gitConfigMap("cm-01", "new"),
		gitManifests + "/cm-09.yaml": gitConfigMap("cm-09", "new"),
	})
	newer := r.WaitTick(20*time.Second, ok.ID, regAt(d2))
	if newer.Num("pruned") != 2 || newer.Num("created") != 1 || newer.Num("updated") != 1 {
		t.Fatalf("%s: created %v, updated %v, pruned %v; want 1, 1, 2", newer, newer.Num("created"), newer.Num("updated"), newer.Num("pruned"))
	}
	newer = r.WaitTick(10*time.Second, newer.ID, Converged)
	before := gitLive(t, ns)

	reg.ResetRequests()
	moved := time.Now()
	reg.Tag(t, regRepo, d1, "latest")
	r.Recovery("registry tag moved back", moved, newer.ID, 2, 20*time.Second, regAt(d1))
	applied := r.WaitTick(time.Second, newer.ID, regAt(d1))
	if applied.Num("created") != 2 || applied.Num("updated") != 1 || applied.Num("pruned") != 1 {
		t.Errorf("%s: created %v, updated %v, pruned %v; want 2, 1, 1", applied, applied.Num("created"), applied.Num("updated"), applied.Num("pruned"))
	}
	got := gitLive(t, ns)
	if diff := cmp.Diff([]string{"cm-00", "cm-01", "cm-02"}, slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("live ConfigMaps after the tag moved back (-want +got):\n%s", diff)
	}
	if got["cm-01"].UID != before["cm-01"].UID || got["cm-01"].Value != "v1" {
		t.Errorf("cm-01 = %+v, want the same object (uid %s) back at v1", got["cm-01"], before["cm-01"].UID)
	}
	r.WaitTick(10*time.Second, applied.ID, Converged)
	if n := regBlobGets(reg.Requests()); n != 0 {
		t.Errorf("%d blob downloads after the tag moved back, want none: the older artifact is in the cache (requests %v)", n, reg.Requests())
	}
	for _, tk := range r.Ticks() {
		if tk.ID > ok.ID && tk.Failed() {
			t.Errorf("%s", tk)
		}
	}
}

// regArtifactDir is the cached artifact of digest under recond's
// --cache-dir cache: oci-<hash of the repository>/<hex>.
func regArtifactDir(t *testing.T, cache, digest string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(cache, "oci-*", strings.TrimPrefix(digest, "sha256:")))
	if len(dirs) != 1 {
		t.Fatalf("want one cached artifact %s under %s, have %v", digest, cache, dirs)
	}
	return dirs[0]
}

// regGarbage overwrites the file p with as many bytes of garbage.
func regGarbage(t *testing.T, p string) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, st.Size())
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(p, junk, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFaultRegistryCacheDamaged: the cached artifact recond is at is
// damaged, or the artifact cache deleted, between ticks. The same digest
// goes on converging (its render is reused; a deleted cache is pulled
// again); a new push is applied; and the tag moved back to the damaged
// digest costs at most one failed render, after which the next fetch pulls
// it again, once.
func TestFaultRegistryCacheDamaged(t *testing.T) {
	tests := []struct {
		name string
		// damage damages the cached artifact dir of the digest recond is at
		// (cache is --cache-dir).
		damage func(t *testing.T, cache, dir string)
		// failures is how many ticks may fail over the whole row.
		failures int
		// pullSame and pullBack are the blob downloads after the damage at
		// the same digest, and after the tag moved back to it.
		pullSame, pullBack int
	}{
		{"layer garbage", func(t *testing.T, _, dir string) { regGarbage(t, filepath.Join(dir, "layer.tar.gz")) }, 1, 0, 1},
		{"layer truncated", func(t *testing.T, _, dir string) {
			p := filepath.Join(dir, "layer.tar.gz")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, 1, 0, 1},
		{"manifest garbage", func(t *testing.T, _, dir string) { regGarbage(t, filepath.Join(dir, "manifest.json")) }, 1, 0, 1},
		{"cache deleted", func(t *testing.T, _, dir string) {
			if err := os.RemoveAll(filepath.Dir(dir)); err != nil {
				t.Fatal(err)
			}
		}, 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp.Require(t)
			reg := registry.Start(t, registry.Options{Front: true})
			d1 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
			ns := cp.Namespace(t)
			cache := t.TempDir()
			r, ok := startReg(t, reg.Host, "latest", ns, "--cache-dir", cache)
			before := gitLive(t, ns)

			reg.ResetRequests()
			prior := r.LastTick()
			tt.damage(t, cache, regArtifactDir(t, cache, d1))
			damaged := time.Now()
			// The same digest first: its render is reused, and the fetch
			// only asks the registry which digest the tag names (a deleted
			// cache is pulled again). The converged tick after the recovering
			// one started after the damage.
			r.Recovery("registry cache damaged, same digest: "+tt.name, damaged, prior.ID, 2, 10*time.Second, regAt(d1))
			r.WaitTick(10*time.Second, r.WaitTick(time.Second, prior.ID, regAt(d1)).ID, Converged)
			if n := regBlobGets(reg.Requests()); n != tt.pullSame {
				t.Errorf("%d blob downloads at the same digest after the damage, want %d: %v", n, tt.pullSame, reg.Requests())
			}
			gitCheckUntouched(t, ns, before)

			// A new push: pulled and applied.
			prior = r.LastTick()
			pushed := time.Now()
			d2 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v2"))
			r.Recovery("registry cache damaged, new push: "+tt.name, pushed, prior.ID, 2, 10*time.Second, regAt(d2))
			newer := r.WaitTick(10*time.Second, r.WaitTick(time.Second, prior.ID, regAt(d2)).ID, Converged)

			// The tag moved back to the damaged digest: its render reads the
			// cached files. The tick in flight at the move, one failed
			// render, the pull.
			reg.ResetRequests()
			moved := time.Now()
			reg.Tag(t, regRepo, d1, "latest")
			r.Recovery("registry cache damaged, tag moved back to it: "+tt.name, moved, newer.ID, 3, 20*time.Second, regAt(d1))
			back := r.WaitTick(time.Second, newer.ID, regAt(d1))
			r.WaitTick(10*time.Second, back.ID, Converged)
			if got := gitLive(t, ns)["cm-00"]; got.Value != "v1" || got.UID != before["cm-00"].UID {
				t.Errorf("cm-00 = %+v, want the same object (uid %s) back at v1", got, before["cm-00"].UID)
			}
			if n := regBlobGets(reg.Requests()); n != tt.pullBack {
				t.Errorf("%d blob downloads after the tag moved back to the damaged artifact, want %d: %v", n, tt.pullBack, reg.Requests())
			}
			failed := 0
			for _, tk := range r.Ticks() {
				if tk.ID > ok.ID && tk.Failed() {
					failed++
					t.Logf("failed: %s", tk)
					if tk.Phase != "read" || failed > tt.failures {
						t.Errorf("%s: want at most %d failed tick(s), in read", tk, tt.failures)
					}
					if tk.Num("pruned") > 0 || tk.Num("created") > 0 || tk.Num("updated") > 0 {
						t.Errorf("%s wrote: created %v, updated %v, pruned %v", tk, tk.Num("created"), tk.Num("updated"), tk.Num("pruned"))
					}
					// Its error names the damaged artifact as every line of
					// recond names a digest: "sha256:" and 12 hex digits.
					if !strings.Contains(tk.Error, "damaged") || !strings.Contains(tk.Error, d1[:19]) {
						t.Errorf("error %q does not say that the cached artifact %s is damaged", tk.Error, d1[:19])
					}
				}
			}
		})
	}
}
