package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// A Secret whose stringData holds what is not a string (an unquoted true
// or 8080, as a chart writes a value without `quote`) is an invalid
// manifest, refused before anything is written and naming the Secret and
// the key: the API server would answer it with a 500, which reads as
// unavailable.
func TestSecretStringDataNotAStringIsInvalid(t *testing.T) {
	for _, c := range []struct{ name, value, says string }{
		{"a boolean", "true", "Secret/db: stringData.enabled is not a string (a boolean;"},
		{"a number", "8080", "Secret/db: stringData.enabled is not a string (a number;"},
		{"a map", "{a: b}", "Secret/db: stringData.enabled is not a string (a map;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := testenv.NewRepo(t)
			repo.Commit("secret", map[string]string{
				"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: admin\n  enabled: " + c.value + "\n",
			})
			args := append([]string{"sync"}, clusterArgs(t, repo.URL())...)
			code, _, errOut := recond(t, args...)
			line := tickLine(errOut)
			for _, s := range []string{`"reason":"invalid"`, c.says} {
				if !strings.Contains(line, s) {
					t.Errorf("the tick line does not say %s:\n%s", s, line)
				}
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if _, err := cp.Client.CoreV1().Secrets(args[4]).Get(context.Background(), "db", metav1.GetOptions{}); err == nil {
				t.Error("the Secret was written")
			}
		})
	}
}
