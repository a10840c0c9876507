package tinyca

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServingCertVerifies(t *testing.T) {
	ca, err := New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServingCert()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(cert.CertPEM(), cert.KeyPEM()); err != nil {
		t.Fatalf("PEM pair: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = ServerTLS(cert)
	srv.StartTLS()
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with the CA trusted: %v", err)
	}
	resp.Body.Close()
	other, err := New("other CA")
	if err != nil {
		t.Fatal(err)
	}
	c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: other.Pool()}}}
	if _, err := c.Get(srv.URL); err == nil {
		t.Fatal("GET trusting another CA succeeded")
	}
}

func TestSigningCertChains(t *testing.T) {
	ca, err := New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	sign, err := ca.SigningCert("issuer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if sign.Cert.Subject.CommonName != "issuer" || Serial().Cmp(sign.Cert.SerialNumber) <= 0 {
		t.Fatalf("subject %q serial %v", sign.Cert.Subject.CommonName, sign.Cert.SerialNumber)
	}
}
