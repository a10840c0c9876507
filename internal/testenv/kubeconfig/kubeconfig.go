package kubeconfig

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// name is the cluster's, the user's and the context's in every file.
const name = "testenv"

// FromREST is the kubeconfig of cfg: its server (https when cfg has TLS
// settings), CA and credentials (client certificate, token, basic auth),
// and the user it impersonates.
func FromREST(cfg *rest.Config) ([]byte, error) {
	host, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for host %q: %w", cfg.Host, err)
	}
	scheme := "https"
	if !rest.IsConfigTransportTLS(*cfg) {
		scheme = "http"
	}
	c := clientcmdapi.NewConfig()
	c.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   (&url.URL{Scheme: scheme, Host: host.Host, Path: cfg.APIPath}).String(),
		CertificateAuthorityData: cfg.CAData,
	}
	c.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		Username:              cfg.Username,
		Password:              cfg.Password,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	c.CurrentContext = name
	return clientcmd.Write(*c)
}

// Write writes the kubeconfig of cfg (FromREST) into a temporary
// directory of the test and returns its path.
func Write(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	b, err := FromREST(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
