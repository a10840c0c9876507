package kustomize

import (
	"context"
	"errors"
	"strings"
	"testing"

	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
)

// TestBuild: a kustomization of any tree (here one held in memory) builds
// to its objects, and one that reaches outside the repository is refused
// before kustomize runs, naming the kustomization file and the entry.
func TestBuild(t *testing.T) {
	root := tree.MemFiles(map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\nnamePrefix: k-\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"bad/kustomization.yaml": "resources:\n- ../../etc\n",
	})
	ctx := context.Background()
	out, err := Build(ctx, root, "app", render.NewBudget(render.DefaultLimits), helm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "name: k-a") {
		t.Errorf("output:\n%s\nwant the ConfigMap k-a", out)
	}
	_, err = Build(ctx, root, "bad", render.NewBudget(render.DefaultLimits), helm.Request{})
	var me *render.ManifestError
	if !errors.As(err, &me) || me.File != "bad/kustomization.yaml" || !strings.Contains(err.Error(), `resources entry "../../etc"`) ||
		!strings.Contains(err.Error(), "outside the repository") {
		t.Errorf("a resource outside the repository: %v, want it refused naming the kustomization and the entry", err)
	}
}

// TestCheckEnvFile: an env file line whose key a Secret may not hold is
// refused naming the line, never showing what may be a value.
func TestCheckEnvFile(t *testing.T) {
	for _, tc := range []struct {
		data, want string
	}{
		{"# comment\n\nUSER=app\nPASSWORD=Hunter2\nEMPTY\n", ""},
		{"\xEF\xBB\xBFUSER=app\n", ""},
		{"USER=app\nDB_PASSWORD: Hunter2\n", `line 2: key "DB_PASSWORD…" is not a valid Secret key`},
		{"USER=app\n\xff=x\n", "line 2: not valid UTF-8"},
	} {
		err := checkEnvFile([]byte(tc.data), func(line int, format string, args ...any) error {
			return render.SecretErrorf("line %d: "+format, append([]any{line}, args...)...)
		})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.data, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.data, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "Hunter2"):
			t.Errorf("%q: %v quotes the value", tc.data, err)
		}
	}
}
