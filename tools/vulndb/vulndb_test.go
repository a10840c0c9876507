package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// snapshot is the commit time stamped on entries without a modified time.
var snapshot = time.Date(2026, 11, 5, 23, 49, 57, 0, time.UTC)

func TestLatestFixed(t *testing.T) {
	type ev = struct {
		Introduced string `json:"introduced,omitempty"`
		Fixed      string `json:"fixed,omitempty"`
	}
	semver := func(events ...ev) osvRange { return osvRange{Type: "SEMVER", Events: events} }
	for _, tc := range []struct {
		name   string
		ranges []osvRange
		want   string
	}{
		{"one fix", []osvRange{semver(ev{Introduced: "0"}, ev{Fixed: "0.3.7"})}, "0.3.7"},
		{"latest of two branches, compared as versions", []osvRange{semver(ev{Introduced: "0"}, ev{Fixed: "1.9.1"}, ev{Introduced: "1.10.0"}, ev{Fixed: "1.10.2"})}, "1.10.2"},
		{"latest over ranges", []osvRange{semver(ev{Fixed: "2.0.1"}), semver(ev{Fixed: "1.4.0"})}, "2.0.1"},
		{"introduced again after the fix", []osvRange{semver(ev{Introduced: "0"}, ev{Fixed: "1.2.0"}, ev{Introduced: "1.5.0"})}, ""},
		{"never fixed", []osvRange{semver(ev{Introduced: "0"})}, ""},
		{"pseudo-versions", []osvRange{semver(ev{Fixed: "0.0.0-20210101000000-aaaaaaaaaaaa"}, ev{Fixed: "0.0.0-20220101000000-bbbbbbbbbbbb"})}, "0.0.0-20220101000000-bbbbbbbbbbbb"},
		{"not semver", []osvRange{{Type: "GIT", Events: []ev{{Fixed: "abcdef"}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := latestFixed(tc.ranges); got != tc.want {
				t.Errorf("latestFixed = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "db")
	got, err := Generate("testdata/osv", snapshot, out)
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Modified: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC), Entries: 2, Modules: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ file, want string }{
		{"index/db.json", `{"modified":"2099-01-02T03:04:05Z"}`},
		{"index/modules.json", `[` +
			`{"path":"example.com/a","vulns":[{"id":"GO-2099-0002","modified":"2099-01-02T03:04:05Z","fixed":"1.10.1"}]},` +
			`{"path":"golang.org/x/text","vulns":[` +
			`{"id":"GO-2021-0113","modified":"2026-11-05T23:49:57Z","fixed":"0.3.7"},` +
			`{"id":"GO-2099-0002","modified":"2099-01-02T03:04:05Z"}]}]`},
		{"index/vulns.json", `[` +
			`{"id":"GO-2021-0113","modified":"2026-11-05T23:49:57Z","aliases":["CVE-2021-38561","GHSA-ppp9-7jff-5vj2"]},` +
			`{"id":"GO-2099-0002","modified":"2099-01-02T03:04:05Z"}]`},
	} {
		b, err := os.ReadFile(filepath.Join(out, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, string(b)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.file, diff)
		}
	}

	// An entry keeps every field; only a missing modified time is filled in.
	for _, tc := range []struct{ id, modified string }{
		{"GO-2021-0113", "2026-11-05T23:49:57Z"},
		{"GO-2099-0002", "2099-01-02T03:04:05Z"},
	} {
		in, wantEntry := decode(t, filepath.Join("testdata/osv", tc.id+".json")), map[string]any{}
		for k, v := range in {
			wantEntry[k] = v
		}
		wantEntry["modified"] = tc.modified
		if diff := cmp.Diff(wantEntry, decode(t, filepath.Join(out, "ID", tc.id+".json"))); diff != "" {
			t.Errorf("ID/%s.json (-want +got):\n%s", tc.id, diff)
		}
	}
}

func TestGenerateRejects(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"file not named by its id", "GO-2021-0001.json", `{"id":"GO-2021-0002"}`, "file name must be <id>.json"},
		{"not JSON", "GO-2021-0001.json", `id: GO-2021-0001`, "decode"},
		{"no entries", "README.md", `# nothing`, "no OSV entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Generate(dir, snapshot, filepath.Join(t.TempDir(), "db"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEnsure(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cache", "vulndb-1")
	first, err := Ensure("testdata/osv", snapshot, out)
	if err != nil {
		t.Fatal(err)
	}
	// A second call finds the database and does not read the entries again.
	second, err := Ensure(filepath.Join(t.TempDir(), "missing"), snapshot, out)
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("summary of the database found (-first +second):\n%s", diff)
	}
	// A run that fails half-way, after writing an entry, leaves nothing that a
	// later run would take for a database.
	bad := t.TempDir()
	good, err := os.ReadFile("testdata/osv/GO-2021-0113.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"GO-2021-0113.json": good, "GO-2099-9999.json": []byte("{")} {
		if err := os.WriteFile(filepath.Join(bad, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	failed := filepath.Join(t.TempDir(), "vulndb-2")
	if _, err := Ensure(bad, snapshot, failed); err == nil {
		t.Fatal("Ensure over a broken entry succeeded")
	}
	left, err := os.ReadDir(filepath.Dir(failed))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("a failed run left %v", left)
	}
}

func decode(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return m
}
