package bench

import (
	"net/url"
	"testing"
)

func TestVerbOf(t *testing.T) {
	for _, tc := range []struct {
		method, path, ctype, want string
	}{
		{"GET", "/api/v1/namespaces/a/configmaps?labelSelector=x", "", "list"},
		{"GET", "/api/v1/namespaces/a/configmaps/cm", "", "get"},
		{"GET", "/apis/apps/v1/namespaces/a/deployments?watch=true&resourceVersion=1", "", "watch"},
		{"GET", "/apis/apps/v1/namespaces/a/deployments/web", "", "get"},
		{"GET", "/api/v1/namespaces/a", "", "get"},
		{"GET", "/api/v1/namespaces", "", "list"},
		{"GET", "/apis", "", "discovery"},
		{"GET", "/openapi/v3/api/v1", "", "discovery"},
		{"PATCH", "/api/v1/namespaces/a/configmaps/cm?dryRun=All&fieldManager=f&force=true", "application/apply-patch+yaml", "apply (dry run)"},
		{"PATCH", "/api/v1/namespaces/a/configmaps/cm?fieldManager=f", "application/apply-patch+yaml", "apply"},
		{"PATCH", "/api/v1/namespaces/a/configmaps/cm", "application/merge-patch+json", "patch"},
		{"PUT", "/api/v1/namespaces/a/configmaps/cm", "application/json", "update"},
		{"POST", "/api/v1/namespaces/a/configmaps", "application/json", "create"},
		{"DELETE", "/api/v1/namespaces/a/configmaps/cm", "", "delete"},
		{"DELETE", "/api/v1/namespaces/a/configmaps", "", "delete collection"},
	} {
		u, err := url.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := verbOf(tc.method, u, tc.ctype); got != tc.want {
			t.Errorf("verbOf(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestRequestsString(t *testing.T) {
	for _, tc := range []struct {
		r    requests
		want string
	}{
		{requests{}, "none"},
		{requests{"list": 3}, "3 list"},
		{requests{"get": 300, "apply (dry run)": 300, "list": 1.5}, "300 apply (dry run), 300 get, 1.5 list"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%v.String() = %q, want %q", map[string]float64(tc.r), got, tc.want)
		}
	}
}
