package metrics

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"recond.dev/recond/reconcile"
)

// TestDocsMatchCode keeps docs/metrics.md and the registered metrics equal,
// both ways: every recond_* metric registered is documented, and every
// documented one is registered.
func TestDocsMatchCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(recond_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	reg := prometheus.NewRegistry()
	m := New(reg, Options{})
	m.TickEnd(context.Background(), &reconcile.Result{Revision: "r", Outcome: reconcile.OutcomeConverged})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), Namespace+"_") {
			registered = append(registered, mf.GetName())
		}
	}
	slices.Sort(documented)
	slices.Sort(registered)
	for _, n := range registered {
		if !slices.Contains(documented, n) {
			t.Errorf("%s is registered but not in docs/metrics.md", n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(registered, n) {
			t.Errorf("%s is in docs/metrics.md but not registered", n)
		}
	}
	if len(registered) != 37 {
		t.Errorf("registered %d recond metrics, want 37: %v", len(registered), registered)
	}
}
