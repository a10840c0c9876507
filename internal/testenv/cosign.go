package testenv

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv/tools"
)

// Cosign is the real cosign ($COSIGN_BIN, which `make fixtures` builds
// from tools/cosign), run in an environment of its own: the whole environment
// is set (no COSIGN_*, SIGSTORE_*, TUF_* or cloud variable of the test's),
// HOME, TMPDIR and DOCKER_CONFIG in a temporary directory, the Sigstore TUF
// cache off, and HTTP(S)_PROXY pointing at a trap that records and refuses
// any request: Go's proxy rules never proxy loopback, so the test registry
// is reached and anything else cosign tried to reach would be recorded.
type Cosign struct {
	t    testing.TB
	bin  string
	dir  string
	trap *proxyTrap
}

// NewCosign finds cosign (tools.Cosign, $COSIGN_BIN: `make fixtures`
// builds it, for the tests that write cosign's signatures into testdata/).
func NewCosign(t testing.TB) *Cosign {
	t.Helper()
	bin := tools.Find(t, tools.Cosign)
	dir := t.TempDir()
	for _, d := range []string{"home", "docker", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "docker", "config.json"), []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Cosign{t: t, bin: bin, dir: dir, trap: startProxyTrap(t)}
}

func (c *Cosign) env() []string {
	home := filepath.Join(c.dir, "home")
	proxy := "http://" + c.trap.addr
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + filepath.Join(c.dir, "tmp"),
		"DOCKER_CONFIG=" + filepath.Join(c.dir, "docker"),
		"TUF_ROOT=" + filepath.Join(home, ".sigstore", "root"),
		"SIGSTORE_NO_CACHE=true",
		"COSIGN_PASSWORD=x",
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy,
		"NO_PROXY=", "no_proxy=",
		"LANG=C",
	}
}

// Run runs cosign in its directory and returns its combined output,
// failing the test when it fails.
func (c *Cosign) Run(args ...string) string {
	c.t.Helper()
	out, err := c.Try(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// Try runs cosign in its directory and returns its combined output, and
// an error holding it when cosign fails.
func (c *Cosign) Try(args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	c.t.Logf("cosign %s (%v)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		return string(out), fmt.Errorf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// KeyPair makes a cosign key pair of kind ("ecdsa-p256", "ecdsa-p384",
// "ed25519" or "rsa-2048"), files name.key and name.pub: with
// generate-key-pair for "ecdsa-p256" (cosign's own kind), otherwise a key
// made here and given to import-key-pair. It returns the private key file
// and the public key file (PEM).
func (c *Cosign) KeyPair(kind, name string) (keyFile, pubFile string) {
	c.t.Helper()
	if kind == "ecdsa-p256" {
		c.Run("generate-key-pair", "--output-key-prefix", name)
	} else {
		var (
			priv crypto.Signer
			err  error
		)
		switch kind {
		case "ecdsa-p384":
			priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		case "ed25519":
			_, priv, err = ed25519.GenerateKey(rand.Reader)
		case "rsa-2048":
			priv, err = rsa.GenerateKey(rand.Reader, 2048)
		default:
			c.t.Fatalf("no key kind %q", kind)
		}
		if err != nil {
			c.t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			c.t.Fatal(err)
		}
		in := filepath.Join(c.dir, name+".pem")
		if err := os.WriteFile(in, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			c.t.Fatal(err)
		}
		c.Run("import-key-pair", "--key", in, "--output-key-prefix", name)
	}
	return filepath.Join(c.dir, name+".key"), filepath.Join(c.dir, name+".pub")
}

// proxyTrap is an HTTP proxy that answers every request 403 and records
// its request line (CONNECT host:443 for HTTPS).
type proxyTrap struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func startProxyTrap(t testing.TB) *proxyTrap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxyTrap{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(conn).ReadString('\n')
				p.mu.Lock()
				p.seen = append(p.seen, strings.TrimSpace(line))
				p.mu.Unlock()
				fmt.Fprint(conn, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	return p
}

func (p *proxyTrap) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// Version is the version of cosign that runs (its build information).
func (c *Cosign) Version() string {
	c.t.Helper()
	return tools.Version(c.t, c.bin, "github.com/sigstore/cosign/v2")
}

// Escaped lists what cosign tried to reach through the proxy: anything
// but the loopback registry (which Go never proxies).
func (c *Cosign) Escaped() []string { return c.trap.requests() }
