package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
)

// client-go logs every request's and response's body from its verbosity 8
// (--log-level debug-4), cut at 1 KiB, and whole from its verbosity 10
// (debug-6): recond sync of a Secret, so logged, never shows its values,
// as they are or base64-encoded; a whole body that names no Secret is
// shown, and every body about the Secret is shown by its length. (The
// test's name holds no "secret": the namespace, in every body, is made
// from it.)
func TestClientGoBodiesMasked(t *testing.T) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	pw := "pw-" + hex.EncodeToString(b)
	repo := testenv.NewRepo(t)
	repo.Commit("a Secret", map[string]string{
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + pw + "\n",
		"cm.yaml":     cmYAML,
	})
	for _, level := range []string{"debug", "debug-4", "debug-6"} {
		args := append([]string{"sync"}, clusterArgs(t, repo.URL())...)
		code, _, stderr := recond(t, append(args, "--log-level", level)...)
		if code != 0 {
			t.Fatalf("%s: recond sync: exit %d", level, code)
		}
		for _, v := range []string{pw, base64.StdEncoding.EncodeToString([]byte(pw))} {
			if strings.Contains(stderr, v) {
				t.Errorf("%s: the log shows the Secret's value %q", level, v)
			}
		}
		if level == "debug" {
			continue
		}
		wants := []string{`"msg":"Request Body"`, `"msg":"Response Body"`, `bytes not shown`}
		if level == "debug-6" {
			wants = append(wants, `not shown: about a Secret`, `\"kind\":\"ConfigMap\"`)
		}
		for _, want := range wants {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: client-go's log lacks %s", level, want)
			}
		}
	}
}
