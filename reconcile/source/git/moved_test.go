package git

import (
	"context"
	"errors"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/fetch"
)

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// Moved tells whether the followed ref moved away from a revision without
// fetching, and without the clone's lock (a render holds it while Moved is
// asked): locally and over HTTP; a ref that is a commit SHA never moves.
func TestMoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"local", false}, {"http", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.NewRepo(t)
			url := r.Dir
			if tc.remote {
				url = r.ServeHTTP(t, nil)
			}
			c1 := r.Commit("a", map[string]string{"a.yaml": cm("a")})
			s := mustNew(t, Options{URL: url, CacheDir: t.TempDir()})
			rev, err := s.Fetch(context.Background())
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			moved := func() bool {
				t.Helper()
				type answer struct {
					moved bool
					err   error
				}
				ch := make(chan answer, 1)
				// The clone locked as by a render: Moved must not wait for it.
				mu := cacheLock(s.cache)
				mu.Lock()
				defer mu.Unlock()
				go func() {
					m, err := s.Moved(context.Background(), rev)
					ch <- answer{m, err}
				}()
				select {
				case a := <-ch:
					if a.err != nil {
						t.Fatalf("Moved: %v", a.err)
					}
					return a.moved
				case <-time.After(time.Minute): // hang guard
					t.Fatal("Moved waited for the clone's lock")
					return false
				}
			}
			if moved() {
				t.Fatalf("Moved at %s = true before any new commit", c1[:12])
			}
			r.Commit("b", map[string]string{"a.yaml": cm("b")})
			if !moved() {
				t.Fatal("Moved = false after a new commit on the followed ref")
			}
			pinned := mustNew(t, Options{URL: url, Ref: c1, CacheDir: t.TempDir()})
			prev, err := pinned.Fetch(context.Background())
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if m, err := pinned.Moved(context.Background(), prev); err != nil || m {
				t.Errorf("Moved with a ref that is a commit SHA = %v, %v; want false", m, err)
			}
		})
	}
}

// TestOpenHoldsTheClone: a tree opened from a clone keeps it locked for
// reading until it is closed, so that no Fetch replaces it under a render;
// a revision that is not a commit SHA is refused before anything is read.
func TestOpenHoldsTheClone(t *testing.T) {
	r := testenv.NewRepo(t)
	c1 := r.Commit("a", map[string]string{"deploy/a.yaml": cm("a")})
	s := mustNew(t, Options{URL: r.ServeHTTP(t, nil), Path: "deploy", CacheDir: t.TempDir()})
	if _, err := s.Fetch(context.Background()); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	tr, err := s.Open(c1)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if tr.Rev != c1 || tr.Path != "deploy" || tr.Time.IsZero() || tr.Reopen != (fetch.Location{Source: Name, Path: s.cache}) {
		t.Errorf("Open = %+v", tr)
	}
	if e, err := tr.Dir.Entry("a.yaml"); err != nil || e.Name != "a.yaml" {
		t.Errorf("Dir.Entry(a.yaml) = %v, %v", e, err)
	}
	if cacheLock(s.cache).TryLock() {
		t.Fatal("the clone is not locked while a tree of it is open")
	}
	tr.Close()
	if !cacheLock(s.cache).TryLock() {
		t.Fatal("the clone is still locked once the tree is closed")
	}
	cacheLock(s.cache).Unlock()
	var re *fetch.RevisionError
	if _, err := s.Open("main"); err == nil || !errors.As(err, &re) {
		t.Errorf("Open(main) = %v, want a *fetch.RevisionError", err)
	}
}
