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

// proofHeader is a header that may carry a provider's proof, and the scheme
// the proof in it is under.
type proofHeader struct {
	name   string
	scheme scheme
}

// providerHeaders are the headers of one provider: those that name its event
// (any one of them marks a request as the provider's), those that carry the
// delivery id and those that carry the proof, each list in the order they
// are read: the first one set wins.
type providerHeaders struct {
	provider string
	event    []string
	delivery []string
	proof    []proofHeader
}

// byEventHeader is the providers in the order detect looks for them. Gitea
// and Forgejo also send X-GitHub-Event (and X-Gogs-Event) for
// compatibility, so they are looked for first; GitLab comes before GitHub
// for the same reason.
var byEventHeader = []providerHeaders{
	{
		provider: Gitea,
		event:    []string{"X-Forgejo-Event", "X-Gitea-Event"},
		delivery: []string{"X-Forgejo-Delivery", "X-Gitea-Delivery"},
		proof: []proofHeader{
			{"X-Forgejo-Signature", schemeHex},
			{"X-Gitea-Signature", schemeHex},
			{"X-Hub-Signature-256", schemePrefixed},
		},
	},
	{
		provider: GitLab,
		event:    []string{"X-Gitlab-Event"},
		delivery: []string{"X-Gitlab-Event-UUID", "Idempotency-Key"},
		proof:    []proofHeader{{"X-Gitlab-Token", schemeToken}},
	},
	{
		provider: GitHub,
		event:    []string{"X-GitHub-Event"},
		delivery: []string{"X-GitHub-Delivery"},
		proof:    []proofHeader{{"X-Hub-Signature-256", schemePrefixed}},
	},
	{
		// X-Hook-UUID names the webhook, not the delivery: it is the same on
		// every request, so it must not be taken for a delivery id.
		provider: Bitbucket,
		event:    []string{"X-Event-Key"},
		delivery: []string{"X-Request-UUID", "X-Request-Id"},
		proof:    []proofHeader{{"X-Hub-Signature", schemePrefixed}},
	},
}

// detect tells the provider from its event header (byEventHeader) and reads
// the delivery id and the proof from that provider's headers.
func detect(h http.Header) headers {
	for _, p := range byEventHeader {
		event := first(h, p.event...)
		if event == "" {
			continue
		}
		d := headers{provider: p.provider, event: event, delivery: first(h, p.delivery...)}
		for _, ph := range p.proof {
			if v := h.Get(ph.name); v != "" {
				d.scheme, d.proof = ph.scheme, v
				break
			}
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
