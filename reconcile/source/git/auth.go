package git

import (
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// auth builds the transport credentials, reading secret files afresh.
func (s *Source) auth() (transport.AuthMethod, error) {
	switch s.kind {
	case kindHTTP:
		user, password := s.cfg.Username, s.urlPassword
		if user == "" {
			user = s.urlUser
		}
		for _, f := range []string{s.cfg.PasswordFile, s.cfg.TokenFile} {
			if f == "" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errCredentials, err)
			}
			password = strings.TrimRight(string(b), " \t\r\n")
		}
		if user == "" && password == "" {
			return nil, nil
		}
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: password}, nil
	case kindSSH:
		helper := gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.InsecureIgnoreHostKey()}
		if !s.cfg.InsecureSkipHostKeyCheck {
			// Checked here because go-git silently skips missing files.
			if _, err := os.Stat(s.cfg.KnownHostsFile); err != nil {
				return nil, fmt.Errorf("known_hosts: %w", err)
			}
			db, err := gitssh.NewKnownHostsDb(s.cfg.KnownHostsFile)
			if err != nil {
				return nil, fmt.Errorf("known_hosts: %w", err)
			}
			// Offer only the key types known_hosts has for this host, so the
			// server does not pick one we cannot verify.
			helper = gitssh.HostKeyCallbackHelper{
				HostKeyCallback:   db.HostKeyCallback(),
				HostKeyAlgorithms: db.HostKeyAlgorithms(s.sshAddr),
			}
		}
		if s.cfg.SSHKeyFile == "" {
			a, err := gitssh.NewSSHAgentAuth(s.sshUser)
			if err != nil {
				return nil, fmt.Errorf("ssh agent: %w", err)
			}
			a.HostKeyCallbackHelper = helper
			return a, nil
		}
		k, err := gitssh.NewPublicKeysFromFile(s.sshUser, s.cfg.SSHKeyFile, "")
		if err != nil {
			return nil, fmt.Errorf("ssh key: %w", err)
		}
		k.HostKeyCallbackHelper = helper
		return k, nil
	}
	return nil, nil
}
