package registry

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"recond.dev/recond/internal/testenv/tinyca"
)

// The names the registry's token auth is configured with: the token
// server signs its tokens as tokenIssuer for tokenService.
const (
	tokenIssuer  = "recond-testenv-token-server"
	tokenService = "recond-testenv-registry"
	tokenTTL     = 5 * time.Minute
)

// tokenServer is the bearer-token endpoint of a registry configured with
// `auth.token`: it checks basic credentials against the registry's users and
// answers an ES256 JWT, with its signing certificate in the x5c header,
// granting the requested repository actions.
type tokenServer struct {
	srv      *httptest.Server
	signing  tinyca.Pair
	users    map[string]string
	requests atomic.Int64
}

// startTokenServer serves the token endpoint on 127.0.0.1, over HTTPS
// when tlsOn.
func startTokenServer(serving, signing tinyca.Pair, users map[string]string, tlsOn bool) *tokenServer {
	ts := &tokenServer{signing: signing, users: users}
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	if tlsOn {
		ts.srv.TLS = tinyca.ServerTLS(serving)
		ts.srv.StartTLS()
	} else {
		ts.srv.Start()
	}
	return ts
}

// realm is the URL the registry sends clients to for a token.
func (ts *tokenServer) realm() string { return ts.srv.URL + "/token" }

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.requests.Add(1)
	if r.URL.Path != "/token" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.Error(w, "the test token server answers GET /token only", http.StatusNotFound)
		return
	}
	subject := ""
	if len(ts.users) > 0 {
		user, pass, ok := r.BasicAuth()
		want, known := ts.users[user]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="recond test token server"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"invalid username or password"}]}`))
			return
		}
		subject = user
	}
	if svc := r.URL.Query().Get("service"); svc != "" && svc != tokenService {
		http.Error(w, fmt.Sprintf("unknown service %q: this token server signs for %q", svc, tokenService), http.StatusBadRequest)
		return
	}
	access := []tokenAccess{}
	for _, s := range r.URL.Query()["scope"] {
		for scope := range strings.FieldsSeq(s) {
			if a, ok := parseScope(scope); ok {
				access = append(access, a)
			}
		}
	}
	now := time.Now()
	tok, err := ts.sign(tokenClaims{
		Issuer:    tokenIssuer,
		Subject:   subject,
		Audience:  tokenService,
		Expiry:    now.Add(tokenTTL).Unix(),
		NotBefore: now.Add(-time.Minute).Unix(),
		IssuedAt:  now.Unix(),
		ID:        tinyca.Serial().String(),
		Access:    access,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token":        tok,
		"access_token": tok,
		"expires_in":   int(tokenTTL.Seconds()),
		"issued_at":    now.UTC().Format(time.RFC3339),
	})
}

// tokenAccess is one entry of a token's access claim.
type tokenAccess struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

// tokenClaims is the claim set distribution's token auth verifies.
type tokenClaims struct {
	Issuer    string        `json:"iss"`
	Subject   string        `json:"sub"`
	Audience  string        `json:"aud"`
	Expiry    int64         `json:"exp"`
	NotBefore int64         `json:"nbf"`
	IssuedAt  int64         `json:"iat"`
	ID        string        `json:"jti"`
	Access    []tokenAccess `json:"access"`
}

// parseScope parses "repository:NAME:pull,push" (the name may hold
// colons); every action asked for is granted, the test registry having no
// other policy than "valid users may do anything".
func parseScope(scope string) (tokenAccess, bool) {
	typ, rest, ok := strings.Cut(scope, ":")
	if !ok {
		return tokenAccess{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return tokenAccess{}, false
	}
	a := tokenAccess{Type: typ, Name: rest[:i], Actions: []string{}}
	for act := range strings.SplitSeq(rest[i+1:], ",") {
		if act != "" {
			a.Actions = append(a.Actions, act)
		}
	}
	return a, true
}

// sign makes the compact JWS of claims: ES256 with the signing key, whose
// certificate (signed by the CA of the registry's rootcertbundle) is the
// x5c header.
func (ts *tokenServer) sign(claims tokenClaims) (string, error) {
	header, err := json.Marshal(map[string]any{
		"typ": "JWT",
		"alg": "ES256",
		"kid": libtrustKeyID(&ts.signing.Key.PublicKey),
		"x5c": []string{base64.StdEncoding.EncodeToString(ts.signing.Cert.Raw)},
	})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(body)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, ts.signing.Key, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign the token: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + enc.EncodeToString(sig), nil
}

// libtrustKeyID is the key ID distribution's libtrust gives a public key:
// the SHA-256 of its DER form, truncated to 240 bits, base32 in 12 groups.
func libtrustKeyID(pub *ecdsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	b32 := base32.StdEncoding.EncodeToString(sum[:30])
	groups := make([]string, 0, 12)
	for i := 0; i < len(b32); i += 4 {
		groups = append(groups, b32[i:i+4])
	}
	return strings.Join(groups, ":")
}
