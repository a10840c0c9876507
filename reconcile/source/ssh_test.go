package source

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshAlias is a host name that only the test's ssh_config knows: it leads
// to the test server, so that an scp-like address (which has no port) can
// reach it.
const sshAlias = "gitserver.test"

// sshGitServer serves the repositories under root over SSH the way a git
// host does: an "exec" request for `git-upload-pack '<path>'` runs the real
// git-upload-pack on root/<path>. Only one client key is accepted.
type sshGitServer struct {
	addr    string // 127.0.0.1:port
	port    int
	hostKey ssh.PublicKey

	root       string
	uploadPack string // path of the git-upload-pack binary
	home       string
	ctx        context.Context
	wg         sync.WaitGroup

	mu       sync.Mutex
	logins   []string // users of the connections that authenticated
	rejected int      // public keys refused
	execs    []string // commands of exec requests
	conns    map[net.Conn]struct{}
	closed   bool
}

func newSSHGitServer(t *testing.T, root string, allowed ssh.PublicKey) *sshGitServer {
	t.Helper()
	uploadPack := gitProgram(t, "git-upload-pack", "SSH")

	hostSigner, _ := newSSHKey(t)
	s := &sshGitServer{
		hostKey:    hostSigner.PublicKey(),
		root:       root,
		uploadPack: uploadPack,
		home:       t.TempDir(),
		conns:      map[net.Conn]struct{}{},
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), allowed.Marshal()) {
				return nil, nil
			}
			s.mu.Lock()
			s.rejected++
			s.mu.Unlock()
			return nil, errors.New("public key not accepted")
		},
	}
	cfg.AddHostKey(hostSigner)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.port = ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx

	// go-git reads ~/.ssh/config through gitssh.DefaultSSHConfig. Replace
	// it so that the user's configuration cannot interfere and sshAlias
	// leads here. Tests in this package do not run in parallel.
	oldConfig := gitssh.DefaultSSHConfig
	gitssh.DefaultSSHConfig = sshConfigAliases{sshAlias: {"Hostname": "127.0.0.1", "Port": strconv.Itoa(s.port)}}

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !s.track(c) {
				c.Close()
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(c, cfg)
			}()
		}
	}()

	t.Cleanup(func() {
		gitssh.DefaultSSHConfig = oldConfig
		cancel() // kills running git-upload-pack processes
		ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		done := make(chan struct{})
		go func() {
			s.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("SSH server goroutines did not stop within 10s")
		}
	})
	return s
}

func (s *sshGitServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *sshGitServer) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return // the client refused the host key, or no key was accepted
	}
	defer sc.Close()
	s.mu.Lock()
	s.logins = append(s.logins, sc.User())
	s.mu.Unlock()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ssh.DiscardRequests(reqs)
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveSession(ch, chReqs)
		}()
	}
}

// serveSession runs the first exec request of a session and refuses every
// other request.
func (s *sshGitServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	handled := false
	for req := range reqs {
		if req.Type != "exec" || handled {
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			continue
		}
		handled = true
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		s.mu.Lock()
		s.execs = append(s.execs, payload.Command)
		s.mu.Unlock()
		repoPath, ok := strings.CutPrefix(payload.Command, "git-upload-pack '")
		repoPath, ok2 := strings.CutSuffix(repoPath, "'")
		if !ok || !ok2 || strings.Contains(repoPath, "'") {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		// Cleaning against "/" keeps the repository under root.
		dir := filepath.Join(s.root, filepath.FromSlash(path.Clean("/"+repoPath)))
		status := s.runUploadPack(ch, dir)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		_ = ch.CloseWrite()
		_ = ch.Close()
	}
}

func (s *sshGitServer) runUploadPack(ch ssh.Channel, dir string) uint32 {
	cmd := exec.CommandContext(s.ctx, s.uploadPack, dir)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.home, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	// A pipe rather than cmd.Stdin = ch: Wait would otherwise also wait
	// for the client to close its end, which it does only after the exit
	// status.
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "%v\n", err)
		return 127
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, _ = io.Copy(stdin, ch) // ends when the channel or connection closes
		stdin.Close()
	}()
	var exitErr *exec.ExitError
	switch err := cmd.Wait(); {
	case err == nil:
		return 0
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		return uint32(exitErr.ExitCode())
	default:
		return 255
	}
}

// seen returns copies of what the server recorded.
func (s *sshGitServer) seen() (logins, execs []string, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.logins...), append([]string(nil), s.execs...), s.rejected
}

// sshConfigAliases stands in for ~/.ssh/config: alias → keyword → value.
type sshConfigAliases map[string]map[string]string

func (c sshConfigAliases) Get(alias, key string) string { return c[alias][key] }

func newSSHKey(t *testing.T) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, priv
}

// writeSSHKey writes priv as an unencrypted OpenSSH private key file.
func writeSSHKey(t *testing.T, name string, priv ed25519.PrivateKey) string {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(priv, "test key")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, string(pem.EncodeToMemory(block)))
}

// writeKnownHosts writes a known_hosts file with one line per address.
func writeKnownHosts(t *testing.T, name string, key ssh.PublicKey, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(knownhosts.Line([]string{a}, key) + "\n")
	}
	return writeFile(t, name, b.String())
}

// fetchWithin is Fetch bounded by a timeout, so that a hung server fails
// the test instead of blocking it.
func fetchWithin(t *testing.T, s *Source) (Revision, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.Fetch(ctx)
}

// sshFixture is a repository served by an sshGitServer, a client key it
// accepts and a known_hosts file naming its host key.
type sshFixture struct {
	repo       *testRepo
	srv        *sshGitServer
	keyFile    string
	knownHosts string
	dir        string // scratch directory for more files
}

func newSSHFixture(t *testing.T) sshFixture {
	root := t.TempDir()
	client, clientPriv := newSSHKey(t)
	srv := newSSHGitServer(t, root, client.PublicKey())
	dir := t.TempDir()
	return sshFixture{
		repo:       newTestRepo(t, filepath.Join(root, "repo")),
		srv:        srv,
		keyFile:    writeSSHKey(t, filepath.Join(dir, "id_ed25519"), clientPriv),
		knownHosts: writeKnownHosts(t, filepath.Join(dir, "known_hosts"), srv.hostKey, fmt.Sprintf("[127.0.0.1]:%d", srv.port)),
		dir:        dir,
	}
}

func TestSSHFetch(t *testing.T) {
	f := newSSHFixture(t)
	c1 := f.repo.commit(map[string]string{"deploy/cm.yaml": cm("one"), "other.txt": "x"})
	url := fmt.Sprintf("ssh://git@127.0.0.1:%d/repo", f.srv.port)
	s := mustNew(t, Config{URL: url, Path: "deploy", SSHKeyFile: f.keyFile, KnownHostsFile: f.knownHosts, CacheDir: t.TempDir()})

	render := func(sha, want string) {
		t.Helper()
		ms, err := s.Render(context.Background(), sha)
		if err != nil {
			t.Fatalf("Render(%s): %v", sha, err)
		}
		if got := names(ms); len(got) != 1 || got[0] != "deploy/cm.yaml ConfigMap/"+want {
			t.Errorf("Render(%s) = %v, want [deploy/cm.yaml ConfigMap/%s]", sha, got, want)
		}
	}

	rev, err := fetchWithin(t, s)
	if err != nil || rev.SHA != c1 || !rev.Fetched {
		t.Fatalf("first Fetch() = %+v, %v; want {SHA:%s Fetched:true}", rev, err, c1)
	}
	render(rev.SHA, "one")

	rev, err = fetchWithin(t, s)
	if err != nil || rev.SHA != c1 || rev.Fetched {
		t.Fatalf("second Fetch() = %+v, %v; want {SHA:%s Fetched:false}", rev, err, c1)
	}

	c2 := f.repo.commit(map[string]string{"deploy/cm.yaml": cm("two")})
	rev, err = fetchWithin(t, s)
	if err != nil || rev.SHA != c2 || !rev.Fetched {
		t.Fatalf("Fetch() after a new commit = %+v, %v; want {SHA:%s Fetched:true}", rev, err, c2)
	}
	render(rev.SHA, "two")

	// Each Fetch lists the refs; the first and third also fetch a pack.
	logins, execs, rejected := f.srv.seen()
	if want := []string{"git", "git", "git", "git", "git"}; !slices.Equal(logins, want) {
		t.Errorf("server logins = %q, want %q", logins, want)
	}
	for _, e := range execs {
		if e != "git-upload-pack '/repo'" {
			t.Errorf("server got exec %q, want git-upload-pack '/repo'", e)
		}
	}
	if len(execs) != 5 || rejected != 0 {
		t.Errorf("server saw %d execs and %d rejected keys, want 5 and 0", len(execs), rejected)
	}
}

func TestSSHHostKeyNotKnown(t *testing.T) {
	f := newSSHFixture(t)
	f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	hostPort := "[127.0.0.1]:" + strconv.Itoa(f.srv.port)
	other, _ := newSSHKey(t)

	tests := []struct {
		name       string
		knownHosts string
		want       ssh.PublicKey // the key known_hosts expects; nil: the host is unknown
	}{
		{"different key", writeKnownHosts(t, filepath.Join(f.dir, "kh-other"), other.PublicKey(), hostPort), other.PublicKey()},
		// The right key, but for port 22 and another host: neither matches.
		{"unknown host", writeKnownHosts(t, filepath.Join(f.dir, "kh-unknown"), f.srv.hostKey, "127.0.0.1", "example.com"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := fmt.Sprintf("ssh://git@127.0.0.1:%d/repo", f.srv.port)
			s := mustNew(t, Config{URL: url, SSHKeyFile: f.keyFile, KnownHostsFile: tt.knownHosts, CacheDir: t.TempDir()})
			rev, err := fetchWithin(t, s)
			if err == nil || rev != (Revision{}) {
				t.Fatalf("Fetch() = %+v, %v; want an error and no revision", rev, err)
			}
			var keyErr *knownhosts.KeyError
			if !errors.As(err, &keyErr) {
				t.Fatalf("Fetch() error = %v (%T), want a *knownhosts.KeyError", err, err)
			}
			if tt.want == nil {
				if len(keyErr.Want) != 0 || !strings.Contains(err.Error(), "key is unknown") {
					t.Errorf("Fetch() error = %v, Want = %v; want an unknown-key error", err, keyErr.Want)
				}
			} else if len(keyErr.Want) != 1 || !bytes.Equal(keyErr.Want[0].Key.Marshal(), tt.want.Marshal()) ||
				!strings.Contains(err.Error(), "key mismatch") {
				t.Errorf("Fetch() error = %v, Want = %v; want a mismatch with the key in known_hosts", err, keyErr.Want)
			}
			if !strings.HasPrefix(err.Error(), "fetch "+url+": ") {
				t.Errorf("error %q lacks the fetch context", err)
			}
		})
	}
	// The client hung up before authenticating: no login, nothing run.
	if logins, execs, _ := f.srv.seen(); len(logins) != 0 || len(execs) != 0 {
		t.Errorf("server logins = %q, execs = %q; want none", logins, execs)
	}
}

func TestSSHInsecureSkipHostKeyCheck(t *testing.T) {
	f := newSSHFixture(t)
	c1 := f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	// No user in the URL: Config.Username is the login.
	s := mustNew(t, Config{URL: fmt.Sprintf("ssh://127.0.0.1:%d/repo", f.srv.port), Username: "deploy",
		SSHKeyFile: f.keyFile, InsecureSkipHostKeyCheck: true, CacheDir: t.TempDir()})
	rev, err := fetchWithin(t, s)
	if err != nil || rev.SHA != c1 || !rev.Fetched {
		t.Fatalf("Fetch() = %+v, %v; want {SHA:%s Fetched:true}", rev, err, c1)
	}
	if logins, _, _ := f.srv.seen(); len(logins) == 0 || logins[0] != "deploy" {
		t.Errorf("server logins = %q, want deploy", logins)
	}
}

func TestSSHClientKeyRefused(t *testing.T) {
	f := newSSHFixture(t)
	f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	_, strangerPriv := newSSHKey(t)
	stranger := writeSSHKey(t, filepath.Join(f.dir, "id_stranger"), strangerPriv)
	s := mustNew(t, Config{URL: fmt.Sprintf("ssh://git@127.0.0.1:%d/repo", f.srv.port),
		SSHKeyFile: stranger, KnownHostsFile: f.knownHosts, CacheDir: t.TempDir()})
	rev, err := fetchWithin(t, s)
	if err == nil || rev != (Revision{}) {
		t.Fatalf("Fetch() = %+v, %v; want an error and no revision", rev, err)
	}
	// go-git does not map an SSH authentication failure to
	// transport.ErrAuthenticationRequired or ErrAuthorizationFailed (it does
	// only for HTTP); what reaches the caller is x/crypto/ssh's message.
	if !strings.Contains(err.Error(), "ssh: unable to authenticate") {
		t.Errorf("Fetch() error = %v, want ssh's \"unable to authenticate\"", err)
	}
	logins, execs, rejected := f.srv.seen()
	if len(logins) != 0 || len(execs) != 0 || rejected == 0 {
		t.Errorf("server logins = %q, execs = %q, rejected keys = %d; want none, none, at least 1", logins, execs, rejected)
	}
}

// An scp-like address has no port; the test ssh_config sends sshAlias to
// the server. go-git then checks the host key under the address it dials.
func TestSSHFetchScpLike(t *testing.T) {
	f := newSSHFixture(t)
	c1 := f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	s := mustNew(t, Config{URL: "git@" + sshAlias + ":repo", SSHKeyFile: f.keyFile, KnownHostsFile: f.knownHosts, CacheDir: t.TempDir()})
	rev, err := fetchWithin(t, s)
	if err != nil || rev.SHA != c1 || !rev.Fetched {
		t.Fatalf("Fetch() = %+v, %v; want {SHA:%s Fetched:true}", rev, err, c1)
	}
	logins, execs, _ := f.srv.seen()
	if len(logins) == 0 || logins[0] != "git" || len(execs) == 0 || execs[0] != "git-upload-pack 'repo'" {
		t.Errorf("server logins = %q, execs = %q; want git and git-upload-pack 'repo'", logins, execs)
	}
}
