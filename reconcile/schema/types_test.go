package schema

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"

	"recond.dev/recond/reconcile/diff"
)

// fakeServer serves fixture documents the way the OpenAPI v3 endpoint does,
// counting the requests.
type fakeServer struct {
	t     *testing.T
	docs  map[string]string // document path -> fixture file
	hash  map[string]int    // document path -> version, part of its URL
	lists int
	gets  map[string]int
}

type fakeGV struct {
	s    *fakeServer
	path string
}

func (f *fakeServer) PathsWithContext(context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	f.lists++
	out := map[string]openapi.GroupVersionWithContext{}
	for p := range f.docs {
		out[p] = fakeGV{f, p}
	}
	return out, nil
}

func (g fakeGV) SchemaWithContext(context.Context, string) ([]byte, error) {
	g.s.gets[g.path]++
	return readFixture(g.s.t, g.s.docs[g.path]), nil
}

func (g fakeGV) ServerRelativeURL() string {
	return fmt.Sprintf("/openapi/v3/%s?hash=%d", g.path, g.s.hash[g.path])
}

func TestPrepareCaches(t *testing.T) {
	srv := &fakeServer{t: t,
		docs: map[string]string{"apis/autoscaling/v2": "autoscaling-v2.json", "api/v1": "core-v1.json"},
		hash: map[string]int{}, gets: map[string]int{}}
	types := newTypes(srv)
	clock := time.Unix(1e9, 0)
	types.now = func() time.Time { return clock }
	ctx := context.Background()
	averageValue := []string{"spec", "metrics", diff.Item, "external", "target", "averageValue"}
	widgetSize := []string{"spec", "size"}

	type calls struct{ lists, gets int }
	count := func() calls {
		n := 0
		for _, g := range srv.gets {
			n += g
		}
		return calls{srv.lists, n}
	}
	steps := []struct {
		name  string
		do    func()
		kinds []schema.GroupVersionKind
		want  calls // cumulative
		check func(t *testing.T)
	}{
		{
			name: "cold: list, then one document per group-version", kinds: []schema.GroupVersionKind{hpaKind, limitRangeKind, serviceKind},
			want: calls{1, 2},
			check: func(t *testing.T) {
				if got := types.TypeOf(hpaKind, averageValue); got != diff.FieldQuantity {
					t.Errorf("averageValue = %s, want quantity", got)
				}
			},
		},
		{name: "warm: no call", kinds: []schema.GroupVersionKind{hpaKind, limitRangeKind}, want: calls{1, 2}},
		{name: "warm again: no call", kinds: []schema.GroupVersionKind{serviceKind}, want: calls{1, 2}},
		{
			name: "unknown kind: one list, nothing changed to fetch", kinds: []schema.GroupVersionKind{hpaKind, widgetKind},
			want: calls{2, 2},
		},
		{
			name: "unknown kind within the retry interval: no call", kinds: []schema.GroupVersionKind{widgetKind},
			do: func() { clock = clock.Add(DefaultRetry / 2) }, want: calls{2, 2},
		},
		{
			name: "crd installed, retry elapsed: its document fetched", kinds: []schema.GroupVersionKind{widgetKind},
			do: func() {
				clock = clock.Add(DefaultRetry)
				srv.docs["apis/example.com/v1"] = "example.com-v1.json"
			},
			want: calls{3, 3},
			check: func(t *testing.T) {
				if got := types.TypeOf(widgetKind, widgetSize); got != diff.FieldQuantity {
					t.Errorf("widget size = %s, want quantity", got)
				}
			},
		},
		{
			name: "invalidated, nothing changed: one list, no fetch", kinds: []schema.GroupVersionKind{hpaKind},
			do: types.Invalidate, want: calls{4, 3},
		},
		{
			name: "recheck age: a changed document is fetched again", kinds: []schema.GroupVersionKind{hpaKind},
			do: func() {
				clock = clock.Add(DefaultRecheck)
				srv.hash["apis/example.com/v1"]++
			},
			want: calls{5, 4},
		},
		{
			name: "group-version gone: its kinds are forgotten", kinds: []schema.GroupVersionKind{widgetKind},
			do: func() {
				types.Invalidate()
				delete(srv.docs, "apis/example.com/v1")
			},
			want: calls{6, 4},
			check: func(t *testing.T) {
				if got := types.TypeOf(widgetKind, widgetSize); got != diff.FieldUnknown {
					t.Errorf("widget size = %s, want unknown", got)
				}
				if got := types.TypeOf(hpaKind, averageValue); got != diff.FieldQuantity {
					t.Errorf("averageValue = %s, want quantity", got)
				}
			},
		},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if err := types.Prepare(ctx, s.kinds); err != nil {
			t.Fatalf("%s: Prepare: %v", s.name, err)
		}
		if got := count(); got != s.want {
			t.Errorf("%s: calls (lists, document fetches) = %v, want %v", s.name, got, s.want)
		}
		if s.check != nil {
			s.check(t)
		}
	}
}
