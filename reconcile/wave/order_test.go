package wave

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/reconcile/diff"
)

func TestWavesGroupChangesOfOneRank(t *testing.T) {
	changes := []diff.Change{
		{Kind: "Deployment", Name: "a"}, {Kind: "ConfigMap", Name: "b"}, {Kind: "Widget", Name: "w"},
		{Kind: "ServiceAccount", Name: "s"}, {Kind: "Secret", Name: "c"}, {Kind: "ConfigMap", Name: "a"},
		{Kind: "StatefulSet", Name: "a"}, {Kind: "Role", Name: "r"},
	}
	slices.SortStableFunc(changes, ByDependency)
	var got [][]string
	for _, w := range Split(changes) {
		var names []string
		for _, c := range w {
			names = append(names, c.Kind+"/"+c.Name)
		}
		got = append(got, names)
	}
	want := [][]string{
		{"ServiceAccount/s"}, {"Role/r"},
		{"ConfigMap/a", "ConfigMap/b", "Secret/c"},
		{"Deployment/a", "StatefulSet/a"},
		{"Widget/w"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("waves (-want +got):\n%s", d)
	}
	if w := Split(nil); len(w) != 0 {
		t.Errorf("Split(nil) = %v", w)
	}
}

// Order puts the writes in dependency order and the deletes in reverse.
func TestOrderWritesThenDeletesInReverse(t *testing.T) {
	writes, deletes := Order([]diff.Change{
		{Kind: "Deployment", Name: "a", Action: diff.Create}, {Kind: "ConfigMap", Name: "b", Action: diff.Delete},
		{Kind: "ServiceAccount", Name: "s", Action: diff.Update}, {Kind: "Deployment", Name: "d", Action: diff.Delete},
	})
	name := func(cs []diff.Change) (out []string) {
		for _, c := range cs {
			out = append(out, c.Kind+"/"+c.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{"ServiceAccount/s", "Deployment/a"}, name(writes)); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Deployment/d", "ConfigMap/b"}, name(deletes)); d != "" {
		t.Errorf("deletes (-want +got):\n%s", d)
	}
}
