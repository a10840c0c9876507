package git

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMovedReadsRefFiles: Moved of a local repository reads the ref from
// its files (refs.go) and must see every way a ref moves, however its
// files changed, and nothing else: each change is made after Moved read
// the files at least twice (so that a cached read is what answers). With
// aged files (their times an hour back, as in a repository not written
// lately) the cached content is trusted on its stat; with recent ones it
// is not (racyWindow).
func TestMovedReadsRefFiles(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ref            string
		worktree, bare bool
		packed         bool
		// change changes the repository; r.sha is main's commit, other
		// another commit on branch "other".
		change func(t *testing.T, r layoutRepo, gitDir, other string)
		moved  bool
		// recentOnly: the change keeps the file's size, inode and time,
		// which only the racy-git rule can see.
		recentOnly bool
		// full is the ref git rev-parse is asked for ("" for ref, or HEAD).
		full string
	}{
		{name: "unchanged", change: func(*testing.T, layoutRepo, string, string) {}},
		{name: "unchanged, packed", packed: true, change: func(*testing.T, layoutRepo, string, string) {}},
		{name: "commit", moved: true, change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "commit", "-q", "--allow-empty", "-m", "next")
		}},
		{name: "update-ref", ref: "main", moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other)
		}},
		{name: "rewritten in place, same time", moved: true, recentOnly: true, change: func(t *testing.T, _ layoutRepo, gitDir, other string) {
			rewriteKeepingStat(t, filepath.Join(gitDir, "refs", "heads", "main"), other+"\n")
		}},
		{name: "pack-refs only", change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "pack-refs", "--all")
		}},
		{name: "moved then pack-refs", moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other)
			gitRun(t, r.dir, "pack-refs", "--all")
		}},
		{name: "packed, moved loose", packed: true, moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other)
		}},
		{name: "packed, repacked moved", packed: true, moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other)
			gitRun(t, r.dir, "pack-refs", "--all")
		}},
		{name: "HEAD switched branch", moved: true, change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "symbolic-ref", "HEAD", "refs/heads/other")
		}},
		{name: "HEAD switched to a branch at the same commit", change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "branch", "same", r.sha)
			gitRun(t, r.dir, "symbolic-ref", "HEAD", "refs/heads/same")
		}},
		{name: "detached HEAD elsewhere", moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "--no-deref", "HEAD", other)
		}},
		{name: "detached HEAD in place", change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "update-ref", "--no-deref", "HEAD", r.sha)
		}},
		{name: "followed branch unchanged, another moved", ref: "main", change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/feature-00", other)
		}},
		{name: "tag moved", ref: "v0.1.0", moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "tag", "-f", "v0.1.0", other)
		}},
		{name: "branch created over a tag", ref: "v0.1.0", full: "refs/heads/v0.1.0", moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "branch", "v0.1.0", other) // a branch wins over a tag
		}},
		{name: "worktree commit", worktree: true, moved: true, change: func(t *testing.T, r layoutRepo, _, _ string) {
			gitRun(t, r.dir, "commit", "-q", "--allow-empty", "-m", "next")
		}},
		{name: "worktree, main moved", worktree: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other) // the worktree follows its own branch
		}},
		{name: "bare update-ref", bare: true, moved: true, change: func(t *testing.T, r layoutRepo, _, other string) {
			gitRun(t, r.dir, "update-ref", "refs/heads/main", other)
		}},
	} {
		for _, aged := range []bool{false, true} {
			if aged && tc.recentOnly {
				continue
			}
			name := tc.name + "/recent"
			if aged {
				name = tc.name + "/aged"
			}
			t.Run(name, func(t *testing.T) {
				r := newLayoutRepo(t, layout{files: 3, packedRefs: tc.packed})
				gitRun(t, r.dir, "branch", "other")
				gitRun(t, r.dir, "commit", "-q", "--allow-empty", "-m", "other", "--no-verify")
				other := gitRun(t, r.dir, "rev-parse", "HEAD")
				gitRun(t, r.dir, "update-ref", "refs/heads/other", other)
				gitRun(t, r.dir, "update-ref", "refs/heads/main", r.sha)
				gitRun(t, r.dir, "reset", "-q", "--hard", r.sha)
				if tc.packed {
					gitRun(t, r.dir, "pack-refs", "--all")
				}
				gitDir := filepath.Join(r.dir, ".git")
				url := r.dir
				switch {
				case tc.worktree:
					wt := filepath.Join(t.TempDir(), "wt")
					gitRun(t, r.dir, "worktree", "add", "-q", "-b", "wt", wt, r.sha)
					r.dir, url = wt, wt
				case tc.bare:
					bare := filepath.Join(t.TempDir(), "bare.git")
					gitRun(t, r.dir, "clone", "-q", "--bare", r.dir, bare)
					gitRun(t, bare, "update-ref", "refs/heads/other", other)
					r.dir, url, gitDir = bare, bare, bare
				}
				if aged {
					age(t, gitDir)
				}
				s := newBenchSource(t, Options{URL: url, Ref: tc.ref})
				ctx := context.Background()
				rev, err := s.Fetch(ctx)
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				for range 2 {
					if m, err := s.Moved(ctx, rev); err != nil || m {
						t.Fatalf("Moved before the change = %v, %v", m, err)
					}
				}
				tc.change(t, r, gitDir, other)
				if m, err := s.Moved(ctx, rev); err != nil || m != tc.moved {
					t.Fatalf("Moved after the change = %v, %v; want %v", m, err, tc.moved)
				}
				// Fetch sees what Moved saw, and the new revision has not moved.
				full := tc.full
				if full == "" {
					full = refOrHead(tc.ref)
				}
				want := gitRun(t, r.dir, "rev-parse", full+"^{commit}")
				now, err := s.Fetch(ctx)
				if err != nil || now.SHA != want {
					t.Fatalf("Fetch after the change = %+v, %v; want %s", now, err, want)
				}
				if (now.SHA != rev.SHA) != tc.moved {
					t.Errorf("Fetch found %s, was %s; want moved %v", now.SHA, rev.SHA, tc.moved)
				}
				if m, err := s.Moved(ctx, now); err != nil || m {
					t.Errorf("Moved at the new revision = %v, %v", m, err)
				}
			})
		}
	}
}

func refOrHead(ref string) string {
	if ref == "" {
		return "HEAD"
	}
	return ref
}

// rewriteKeepingStat writes content over the file in place (its inode and
// size kept, as go-git writes a ref) and sets its time back to what it
// was: a write within the file system's timestamp granularity.
func rewriteKeepingStat(t *testing.T, path, content string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(fi, after) || after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the rewrite changed the stat of %s: %v", path, err)
	}
}

// age sets the times of every file of the git directory an hour back.
func age(t *testing.T, gitDir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(gitDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestParsePackedRefs: comments and peeled lines are skipped, the first
// line of a name wins, and a malformed line makes the file unreadable
// here (go-git then reads it).
func TestParsePackedRefs(t *testing.T) {
	a, b := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		ok       bool
	}{
		{"empty", "", map[string]string{}, true},
		{"header, peeled", "# pack-refs with: peeled fully-peeled sorted \n" + a + " refs/tags/v1\n^" + b + "\n", map[string]string{"refs/tags/v1": a}, true},
		{"first wins", a + " refs/heads/main\n" + b + " refs/heads/main\n", map[string]string{"refs/heads/main": a}, true},
		{"crlf", a + " refs/heads/main\r\n", map[string]string{"refs/heads/main": a}, true},
		{"no name", a + "\n", nil, false},
		{"short sha", "1234 refs/heads/main\n", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parsePackedRefs([]byte(tc.in))
			if ok != tc.ok || len(got) != len(tc.want) {
				t.Fatalf("parsePackedRefs = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
