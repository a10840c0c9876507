package git

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	kh := writeFile(t, filepath.Join(dir, "known_hosts"), "")
	tests := []struct {
		name    string
		cfg     Options
		wantErr string // substring; "" means success
		kind    kind
	}{
		{"ssh URL without known_hosts", Options{URL: "ssh://git@example.com/org/repo.git", CacheDir: dir}, "set KnownHostsFile", 0},
		{"scp-like without known_hosts", Options{URL: "git@example.com:org/repo.git", CacheDir: dir}, "InsecureSkipHostKeyCheck", 0},
		{"ssh URL insecure", Options{URL: "ssh://git@example.com:2222/org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true}, "", kindSSH},
		{"scp-like insecure", Options{URL: "git@example.com:org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true}, "", kindSSH},
		{"scp-like known_hosts", Options{URL: "git@example.com:org/repo.git", CacheDir: dir, KnownHostsFile: kh, SSHKeyFile: "/k"}, "", kindSSH},
		{"ssh both host key options", Options{URL: "git@example.com:org/repo.git", CacheDir: dir, KnownHostsFile: kh, InsecureSkipHostKeyCheck: true}, "not both", 0},
		{"ssh with token file", Options{URL: "git@example.com:org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true, TokenFile: "/t"}, "only to https", 0},
		{"https", Options{URL: "https://example.com/org/repo.git", CacheDir: dir, TokenFile: "/t"}, "", kindHTTP},
		{"https without cache dir", Options{URL: "https://example.com/org/repo.git"}, "cache directory", 0},
		{"https password and token", Options{URL: "https://example.com/r", CacheDir: dir, PasswordFile: "/p", TokenFile: "/t"}, "not both", 0},
		{"https with ssh key", Options{URL: "https://example.com/r", CacheDir: dir, SSHKeyFile: "/k"}, "only to ssh", 0},
		{"git protocol", Options{URL: "git://example.com/r", CacheDir: dir}, "unsupported URL scheme", 0},
		{"local path", Options{URL: dir}, "", kindLocal},
		{"file URL", Options{URL: "file://" + dir}, "", kindLocal},
		{"file URL with host", Options{URL: "file://other" + dir}, "must not name a host", 0},
		{"local with credentials", Options{URL: dir, TokenFile: "/t"}, "local repository", 0},
		{"empty URL", Options{}, "URL is empty", 0},
		{"bad ref", Options{URL: dir, Ref: "a..b"}, "invalid reference name", 0},
		{"refspec-like ref", Options{URL: dir, Ref: "main:refs/x"}, "invalid reference name", 0},
		{"path leaving the repo", Options{URL: dir, Path: "a/../../x"}, "leaves the repository", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(): %v", err)
			}
			if s.kind != tt.kind {
				t.Errorf("kind = %v, want %v", s.kind, tt.kind)
			}
		})
	}
}

func TestNewCleansPath(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "/": ".", "deploy/": "deploy", "/a/./b/": "a/b", "a/../b": "b", "//x": "x"} {
		s := mustNew(t, Options{URL: t.TempDir(), Path: in})
		if s.dir != want {
			t.Errorf("Path %q cleaned to %q, want %q", in, s.dir, want)
		}
	}
}

func TestDisplayURLAndRemoteCarryNoSecrets(t *testing.T) {
	tests := []struct {
		url, display, remote string
	}{
		{"https://alice:s3cret@example.com/org/repo.git", "https://example.com/org/repo.git", "https://example.com/org/repo.git"},
		{"https://s3cret@example.com/org/repo.git", "https://example.com/org/repo.git", "https://example.com/org/repo.git"},
		{"http://example.com:8080/repo", "http://example.com:8080/repo", "http://example.com:8080/repo"},
		{"ssh://git:s3cret@example.com:2222/org/repo.git", "ssh://git@example.com:2222/org/repo.git", "ssh://git@example.com:2222/org/repo.git"},
		{"git:s3cret@example.com:org/repo.git", "git@example.com:org/repo.git", "git@example.com:org/repo.git"},
		{"git@github.com:org/repo.git", "git@github.com:org/repo.git", "git@github.com:org/repo.git"},
	}
	for _, tt := range tests {
		s := mustNew(t, Options{URL: tt.url, CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: strings.Contains(tt.display, "git@")})
		if got := s.DisplayURL(); got != tt.display {
			t.Errorf("DisplayURL(%q) = %q, want %q", tt.url, got, tt.display)
		}
		if s.remote != tt.remote {
			t.Errorf("remote URL for %q = %q, want %q", tt.url, s.remote, tt.remote)
		}
	}
	// Errors from New do not quote the password either.
	_, err := New(Options{URL: "https://alice:s3cret@example.com/r", SSHKeyFile: "/k", CacheDir: t.TempDir()})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("New() error = %v, want an error without the password", err)
	}
	s := mustNew(t, Options{URL: "https://alice:s3cret@example.com/r", CacheDir: t.TempDir()})
	if s.urlUser != "alice" || s.urlPassword != "s3cret" {
		t.Errorf("URL credentials = %q/%q, want alice/s3cret", s.urlUser, s.urlPassword)
	}
}

func TestNewSSHUserDefaults(t *testing.T) {
	s := mustNew(t, Options{URL: "ssh://example.com/repo.git", CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: true})
	if s.sshUser != "git" || s.sshAddr != "example.com:22" {
		t.Errorf("ssh user, addr = %q, %q; want git, example.com:22", s.sshUser, s.sshAddr)
	}
	s = mustNew(t, Options{URL: "deploy@example.com:org/repo.git", CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: true})
	if s.sshUser != "deploy" {
		t.Errorf("ssh user = %q, want deploy", s.sshUser)
	}
}

func mustNew(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(): %v", err)
	}
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}
