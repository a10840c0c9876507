package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"
)

// The names the registry's token auth is configured with: the token
// server signs its tokens as tokenIssuer for tokenService.
const (
	tokenIssuer  = "recond-testenv-token-server"
	tokenService = "recond-testenv-registry"
	tokenTTL     = 5 * time.Minute
)

// registryPKI is a registry's test CA and the certificates it signs: the
// serving certificate for 127.0.0.1 (registry, front, redirect listener and
// token server) and the token server's signing certificate.
type registryPKI struct {
	caPEM      []byte
	pool       *x509.CertPool
	serving    tls.Certificate
	servingPEM []byte // certificate, then key
	servingKey []byte
	signKey    *ecdsa.PrivateKey
	signDER    []byte
}

// newRegistryPKI makes a fresh CA and the certificates it signs.
func newRegistryPKI() (*registryPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the test CA's key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "recond test registry CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-sign the test CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse the test CA: %w", err)
	}
	p := &registryPKI{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:  x509.NewCertPool(),
	}
	p.pool.AddCert(ca)

	issue := func(tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return key, der, err
	}

	servKey, servDER, err := issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("issue the serving certificate for 127.0.0.1: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(servKey)
	if err != nil {
		return nil, fmt.Errorf("encode the serving key: %w", err)
	}
	p.servingPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servDER})
	p.servingKey = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if p.serving, err = tls.X509KeyPair(p.servingPEM, p.servingKey); err != nil {
		return nil, fmt.Errorf("load the serving certificate: %w", err)
	}

	p.signKey, p.signDER, err = issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: tokenIssuer},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return nil, fmt.Errorf("issue the token signing certificate: %w", err)
	}
	return p, nil
}

var serials atomic.Int64

// serial is a certificate serial number unique in the process.
func serial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serials.Add(1))
}

// serverTLS is the TLS configuration of the test servers.
func (p *registryPKI) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.serving}, MinVersion: tls.VersionTLS12}
}

// tokenServer is the bearer-token endpoint of a registry configured with
// `auth.token`: it checks basic credentials against the registry's users and
// answers an ES256 JWT, with its signing certificate in the x5c header,
// granting the requested repository actions.
type tokenServer struct {
	srv      *httptest.Server
	pki      *registryPKI
	users    map[string]string
	requests atomic.Int64
}

// startTokenServer serves the token endpoint on 127.0.0.1, over HTTPS
// when tlsOn.
func startTokenServer(pki *registryPKI, users map[string]string, tlsOn bool) *tokenServer {
	ts := &tokenServer{pki: pki, users: users}
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	if tlsOn {
		ts.srv.TLS = pki.serverTLS()
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
		ID:        fmt.Sprintf("%d", serial()),
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
		"kid": libtrustKeyID(&ts.pki.signKey.PublicKey),
		"x5c": []string{base64.StdEncoding.EncodeToString(ts.pki.signDER)},
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
	r, s, err := ecdsa.Sign(rand.Reader, ts.pki.signKey, sum[:])
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
