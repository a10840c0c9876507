package git

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// parseURL classifies raw and fills kind, local, remote, display and the
// credentials embedded in the URL. Errors never quote raw, which may hold a
// password.
func (s *Source) parseURL(raw string) error {
	if raw == "" {
		return errors.New("source: URL is empty")
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return errors.New("source: URL is neither a URL, an scp-like address nor a local path")
	}
	if ep.Protocol == "file" {
		s.kind = kindLocal
		s.local = ep.Path
		if u, err := url.Parse(raw); err == nil && u.Scheme == "file" {
			if u.Host != "" && u.Host != "localhost" {
				return errors.New("source: file:// URL must not name a host")
			}
			u.User = nil
			s.display = u.String()
		} else {
			s.display = raw
		}
		return nil
	}
	if ep.Protocol == "ssh" && !strings.Contains(raw, "://") {
		// scp-like user@host:path; a "user:password" login loses its password.
		s.kind = kindSSH
		s.sshUser, _, _ = strings.Cut(ep.User, ":")
		s.sshAddr = net.JoinHostPort(ep.Host, strconv.Itoa(portOr(ep.Port, 22)))
		s.remote = ep.Host + ":" + ep.Path
		if s.sshUser != "" {
			s.remote = s.sshUser + "@" + s.remote
		}
		s.display = s.remote
		return nil
	}

	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("source: URL cannot be parsed")
	}
	switch u.Scheme {
	case "http", "https":
		s.kind = kindHTTP
		if u.User != nil {
			s.urlUser = u.User.Username()
			s.urlPassword, _ = u.User.Password()
		}
		// Credentials go to go-git as BasicAuth, never in the URL, so that
		// no error message (e.g. a *url.Error) can contain them.
		u.User = nil
	case "ssh":
		s.kind = kindSSH
		if u.User != nil {
			s.sshUser = u.User.Username()
			u.User = url.User(s.sshUser)
		}
		s.sshAddr = net.JoinHostPort(u.Hostname(), strconv.Itoa(portOr(ep.Port, 22)))
	default:
		return fmt.Errorf("source: unsupported URL scheme %q (use https, http, ssh, file or a local path)", u.Scheme)
	}
	s.remote = u.String()
	s.display, s.hidden = displayURL(u)
	return nil
}

// displayURL is u (without user information already) as it is shown in
// logs, spans, annotations, Events and the status page: without its query
// and fragment, which may carry a token ("?private_token=..."). hidden are
// the dropped parts, raw and decoded, for scrub.
func displayURL(u *url.URL) (display string, hidden []string) {
	if u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery {
		return u.String(), nil
	}
	add := func(v string) {
		if len(v) >= 3 {
			hidden = append(hidden, v)
		}
	}
	add(u.RawQuery)
	add(u.RawFragment)
	add(u.Fragment)
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for _, vs := range q {
			for _, v := range vs {
				add(v)
				add(url.QueryEscape(v))
			}
		}
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		_, v, _ := strings.Cut(kv, "=")
		add(v)
	}
	sort.Slice(hidden, func(i, j int) bool { return len(hidden[i]) > len(hidden[j]) })
	c := *u
	c.RawQuery, c.Fragment, c.RawFragment, c.ForceQuery = "", "", "", false
	return c.String(), hidden
}

// scrub removes from err's text what display dropped from the URL (go-git
// quotes the URL it requested); errors.Is and errors.As still see err.
func (s *Source) scrub(err error) error {
	if err == nil || len(s.hidden) == 0 {
		return err
	}
	msg := err.Error()
	out := msg
	for _, h := range s.hidden {
		out = strings.ReplaceAll(out, h, "…")
	}
	if out == msg {
		return err
	}
	return &scrubbedError{msg: out, err: err}
}

// scrubbedError is an error shown with what display drops cut from its
// text, its causes kept for errors.Is and errors.As.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// DisplayURL returns the URL without credentials, query or fragment, for
// logs and annotations.
func (s *Source) DisplayURL() string { return s.display }

func portOr(p, def int) int {
	if p > 0 {
		return p
	}
	return def
}

func hostOnly(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p == "22" {
		return h
	}
	return "-p " + p + " " + h
}

func isSHA(ref string) bool {
	if len(ref) != 40 {
		return false
	}
	_, err := hex.DecodeString(ref)
	return err == nil
}

// checkRef normalises a commit SHA to lower case and rejects names git
// would refuse, which could otherwise be mistaken for refspec syntax.
func checkRef(ref string) (string, error) {
	if ref == "" || ref == "HEAD" {
		return ref, nil
	}
	if isSHA(ref) {
		return strings.ToLower(ref), nil
	}
	name := ref
	if !strings.HasPrefix(name, "refs/") {
		name = "refs/heads/" + name
	}
	if err := plumbing.ReferenceName(name).Validate(); err != nil {
		return "", fmt.Errorf("source: ref %q: %w", ref, err)
	}
	return ref, nil
}

// candidates lists the full reference names a short ref may stand for, in
// the order they are tried: a branch wins over a tag of the same name.
func candidates(ref string) []plumbing.ReferenceName {
	switch {
	case ref == "" || ref == "HEAD":
		return []plumbing.ReferenceName{plumbing.HEAD}
	case strings.HasPrefix(ref, "refs/"):
		return []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
}

func refNotFound(ref string) error {
	if ref == "" {
		ref = "HEAD"
	}
	return fmt.Errorf("ref %q: %w", ref, plumbing.ErrReferenceNotFound)
}
