package tinyca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"time"
)

// Pair is a certificate and its private key (ECDSA P-256).
type Pair struct {
	Key  *ecdsa.PrivateKey
	Cert *x509.Certificate
}

// CertPEM is the certificate, PEM-encoded.
func (p Pair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Cert.Raw})
}

// KeyPEM is the private key, PEM-encoded (EC PRIVATE KEY).
func (p Pair) KeyPEM() []byte {
	der, err := x509.MarshalECPrivateKey(p.Key)
	if err != nil {
		// A P-256 key made here always encodes.
		panic(fmt.Sprintf("encode a P-256 key: %v", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// TLS is the pair as a TLS certificate.
func (p Pair) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{p.Cert.Raw}, PrivateKey: p.Key, Leaf: p.Cert}
}

// CA is a self-signed certificate authority, valid from an hour ago for a
// day.
type CA struct {
	Pair
	now time.Time
}

// New makes a CA whose certificate's common name is name.
func New(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the key of %s: %w", name, err)
	}
	c := &CA{now: time.Now()}
	tmpl := c.template(pkix.Name{CommonName: name})
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	c.Pair = Pair{Key: key, Cert: cert}
	return c, nil
}

// Pool is a certificate pool holding the CA only.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// ServingCert signs a serving certificate for 127.0.0.1 and localhost.
func (c *CA) ServingCert() (Pair, error) {
	tmpl := c.template(pkix.Name{CommonName: "127.0.0.1"})
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = []string{"localhost"}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return c.sign(tmpl)
}

// SigningCert signs a certificate for digital signatures whose common name
// is name, such as a token server's (its issuer).
func (c *CA) SigningCert(name string) (Pair, error) {
	tmpl := c.template(pkix.Name{CommonName: name})
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	return c.sign(tmpl)
}

// ServerTLS is the TLS configuration of a server presenting cert.
func ServerTLS(cert Pair) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, MinVersion: tls.VersionTLS12}
}

// template is a certificate of subject valid as long as the CA.
func (c *CA) template(subject pkix.Name) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: Serial(),
		Subject:      subject,
		NotBefore:    c.now.Add(-time.Hour),
		NotAfter:     c.now.Add(24 * time.Hour),
	}
}

// sign issues tmpl with a fresh key, signed by the CA.
func (c *CA) sign(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate the key of %s: %w", tmpl.Subject.CommonName, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, fmt.Errorf("parse the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return Pair{Key: key, Cert: cert}, nil
}

var serials atomic.Int64

// Serial is a number unique in the process: a certificate's serial, a
// token's ID.
func Serial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serials.Add(1))
}
