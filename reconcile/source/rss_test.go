package source

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestRenderPeakRSS renders one large or hostile input and logs the
// process's peak resident memory (VmHWM). It runs only when
// RECOND_RSS_CASE names the case, one case per process:
//
//	RECOND_RSS_CASE=bomb7-kustomize go test ./reconcile/source -run TestRenderPeakRSS -v
func TestRenderPeakRSS(t *testing.T) {
	c := os.Getenv("RECOND_RSS_CASE")
	if c == "" {
		t.Skip("set RECOND_RSS_CASE to one of bomb7, bomb10, big (each -plain or -kustomize)")
	}
	input, mode, _ := strings.Cut(c, "-")
	var content string
	switch input {
	case "bomb7":
		content = aliasBomb(7)
	case "bomb10":
		content = aliasBomb(10)
	case "big":
		var b strings.Builder
		for i := 0; b.Len() < 20<<20; i++ {
			fmt.Fprintf(&b, "---\n%s  pad: %s\n", cm(fmt.Sprintf("c%d", i)), strings.Repeat("z", 1000))
		}
		content = b.String()
	}
	files := map[string]string{"in/m.yaml": content, "k/kustomization.yaml": "resources:\n- m.yaml\n", "k/m.yaml": content}
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(files)
	content, files = "", nil
	path := "in"
	if mode == "kustomize" {
		path = "k"
	}
	before := vmHWM(t)
	ms, err := mustNew(t, Config{URL: dir, Path: path}).Render(context.Background(), sha)
	t.Logf("case %s: %d objects, err=%v; VmHWM before render %s, after %s", c, len(ms), err, before, vmHWM(t))
}

func vmHWM(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}
