package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// The providers, as they appear in the provider label.
const (
	GitHub    = "github"
	Gitea     = "gitea" // Gitea and Forgejo
	GitLab    = "gitlab"
	Bitbucket = "bitbucket" // Bitbucket Cloud, and Bitbucket Server's repo:refs_changed
	Unknown   = "unknown"
)

// Providers is the closed set of provider label values, Unknown last.
var Providers = []string{GitHub, Gitea, GitLab, Bitbucket, Unknown}

// scheme is how a provider proves that it sent a body.
type scheme int

const (
	schemeNone     scheme = iota
	schemePrefixed        // "sha256=<hex HMAC-SHA256 of the body>"
	schemeHex             // "<hex HMAC-SHA256 of the body>"
	schemeToken           // the shared secret itself (GitLab)
)

// headers is what the headers of one request say: who sent it, which event,
// which delivery, and the proof that it is authentic. It is read before the
// body and costs header lookups only.
type headers struct {
	provider string
	event    string
	delivery string
	scheme   scheme
	proof    string
}

// detect tells the provider from its event header. Gitea and Forgejo also
// send X-GitHub-Event (and X-Gogs-Event) for compatibility, so they are
// looked for first; GitLab comes before GitHub for the same reason.
func detect(h http.Header) headers {
	switch {
	case h.Get("X-Forgejo-Event") != "" || h.Get("X-Gitea-Event") != "":
		d := headers{
			provider: Gitea,
			event:    first(h, "X-Forgejo-Event", "X-Gitea-Event"),
			delivery: first(h, "X-Forgejo-Delivery", "X-Gitea-Delivery"),
		}
		switch {
		case h.Get("X-Forgejo-Signature") != "":
			d.scheme, d.proof = schemeHex, h.Get("X-Forgejo-Signature")
		case h.Get("X-Gitea-Signature") != "":
			d.scheme, d.proof = schemeHex, h.Get("X-Gitea-Signature")
		case h.Get("X-Hub-Signature-256") != "":
			d.scheme, d.proof = schemePrefixed, h.Get("X-Hub-Signature-256")
		}
		return d
	case h.Get("X-Gitlab-Event") != "":
		d := headers{
			provider: GitLab,
			event:    h.Get("X-Gitlab-Event"),
			delivery: first(h, "X-Gitlab-Event-UUID", "Idempotency-Key"),
		}
		if t := h.Get("X-Gitlab-Token"); t != "" {
			d.scheme, d.proof = schemeToken, t
		}
		return d
	case h.Get("X-GitHub-Event") != "":
		d := headers{
			provider: GitHub,
			event:    h.Get("X-GitHub-Event"),
			delivery: h.Get("X-GitHub-Delivery"),
		}
		if s := h.Get("X-Hub-Signature-256"); s != "" {
			d.scheme, d.proof = schemePrefixed, s
		}
		return d
	case h.Get("X-Event-Key") != "":
		// X-Hook-UUID names the webhook, not the delivery: it is the same on
		// every request, so it must not be taken for a delivery id.
		d := headers{
			provider: Bitbucket,
			event:    h.Get("X-Event-Key"),
			delivery: first(h, "X-Request-UUID", "X-Request-Id"),
		}
		if s := h.Get("X-Hub-Signature"); s != "" {
			d.scheme, d.proof = schemePrefixed, s
		}
		return d
	}
	return headers{provider: Unknown}
}

func first(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// verifier checks a proof against a body with one secret.
type verifier struct {
	secret []byte
	token  [sha256.Size]byte // digest of the secret, for GitLab's token
}

func newVerifier(secret []byte) verifier {
	return verifier{secret: secret, token: sha256.Sum256(secret)}
}

// verify reports whether proof, sent under scheme s, authenticates body.
// HMACs are compared with hmac.Equal; GitLab's token is compared through
// equal-length digests with crypto/subtle, so neither the length nor a
// prefix of the secret leaks through timing.
func (v verifier) verify(s scheme, proof string, body []byte) bool {
	switch s {
	case schemePrefixed:
		rest, ok := strings.CutPrefix(proof, "sha256=")
		if !ok {
			return false
		}
		return v.hmacEqual(rest, body)
	case schemeHex:
		return v.hmacEqual(proof, body)
	case schemeToken:
		got := sha256.Sum256([]byte(proof))
		return subtle.ConstantTimeCompare(got[:], v.token[:]) == 1
	}
	return false
}

func (v verifier) hmacEqual(hexSig string, body []byte) bool {
	if len(hexSig) != 2*sha256.Size {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, v.secret)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), got)
}
