package render

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"recond.dev/recond/reconcile/source/tree"
)

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// TestFSDirLinksStayInside: through FSDir as through Git, a link that
// leaves the tree fails, naming it.
func TestFSDirLinksStayInside(t *testing.T) {
	fsys := fstest.MapFS{
		"m/a.yaml":   {Data: []byte(cm("a"))},
		"m/out.yaml": {Data: []byte("../../etc/passwd"), Mode: os.ModeSymlink},
	}
	root := tree.FSDir(fsys)
	sub, err := root.Dir("m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Plain(context.Background(), root, sub, "m", NewBudget(DefaultLimits))
	if err == nil || !strings.Contains(err.Error(), "m/out.yaml") || !strings.Contains(err.Error(), "outside the repository") {
		t.Fatalf("a link out of the tree: %v, want an error naming it", err)
	}
}
