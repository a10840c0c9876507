package git

import (
	"context"
	"os"
	"testing"

	"recond.dev/recond/internal/testenv"
)

// TestPeelCachedSeesTheClone: a quiet Fetch of a remote reuses the commit
// its tip peeled to, but not once the clone's objects changed: a clone
// removed (or emptied) is fetched again, and one fetched into after the
// ref moved is read afresh.
func TestPeelCachedSeesTheClone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *Source, r *testenv.Repo) (fetched bool)
	}{
		{"unchanged", func(*testing.T, *Source, *testenv.Repo) bool { return false }},
		{"clone removed", func(t *testing.T, s *Source, _ *testenv.Repo) bool {
			if err := os.RemoveAll(s.cache); err != nil {
				t.Fatal(err)
			}
			return true
		}},
		{"packs removed", func(t *testing.T, s *Source, _ *testenv.Repo) bool {
			if err := os.RemoveAll(s.cache + "/objects/pack"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(s.cache+"/objects/pack", 0o755); err != nil {
				t.Fatal(err)
			}
			return true
		}},
		{"ref moved", func(t *testing.T, _ *Source, r *testenv.Repo) bool {
			r.Commit("b", map[string]string{"a.yaml": cm("b")})
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.NewRepo(t)
			r.Commit("a", map[string]string{"a.yaml": cm("a")})
			s := newBenchSource(t, Options{URL: r.ServeHTTP(t, nil), CacheDir: t.TempDir()})
			ctx := context.Background()
			for i, want := range []bool{true, false} { // fetched, then cached
				rev, err := s.Fetch(ctx)
				if err != nil || rev.Fetched != want {
					t.Fatalf("Fetch %d = %+v, %v; want fetched %v", i, rev, err, want)
				}
			}
			want := tc.change(t, s, r)
			rev, err := s.Fetch(ctx)
			if err != nil || rev.Fetched != want {
				t.Fatalf("Fetch after the change = %+v, %v; want fetched %v", rev, err, want)
			}
			tr, err := s.Open(rev.SHA)
			if err != nil {
				t.Fatalf("Open(%s) after the change: %v", rev.SHA, err)
			}
			tr.Close()
		})
	}
}
