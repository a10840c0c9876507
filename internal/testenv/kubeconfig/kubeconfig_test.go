package kubeconfig

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteReadsBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		want rest.Config
	}{
		{"tls admin", &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}},
			rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}},
		{"token", &rest.Config{Host: "https://127.0.0.1:1234", BearerToken: "t0ken", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}},
			rest.Config{Host: "https://127.0.0.1:1234", BearerToken: "t0ken", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}},
		{"plain http", &rest.Config{Host: "http://127.0.0.1:8080"}, rest.Config{Host: "http://127.0.0.1:8080"}},
		{"impersonating", &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}, Impersonate: rest.ImpersonationConfig{UserName: "system:serviceaccount:ns:recond"}},
			rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}, Impersonate: rest.ImpersonationConfig{UserName: "system:serviceaccount:ns:recond"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clientcmd.BuildConfigFromFlags("", Write(t, tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.want.Host || string(got.CAData) != string(tc.want.CAData) || string(got.CertData) != string(tc.want.CertData) ||
				string(got.KeyData) != string(tc.want.KeyData) || got.BearerToken != tc.want.BearerToken || got.Impersonate.UserName != tc.want.Impersonate.UserName {
				t.Errorf("read back %+v, want %+v", got, tc.want)
			}
		})
	}
}
