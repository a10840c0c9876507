package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// entry is the part of an OSV entry that the indexes are built from.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []osvRange `json:"ranges"`
	} `json:"affected"`
}

// osvRange is one range of affected versions, as a list of events.
type osvRange struct {
	Type   string `json:"type"`
	Events []struct {
		Introduced string `json:"introduced,omitempty"`
		Fixed      string `json:"fixed,omitempty"`
	} `json:"events"`
}

// dbMeta is index/db.json.
type dbMeta struct {
	Modified time.Time `json:"modified"`
}

// moduleMeta is one element of index/modules.json.
type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

// moduleVuln is one entry that affects a module. Fixed is the latest version
// that fixes it, without a "v" (as in OSV), or empty when no version does:
// govulncheck reads only the entries whose Fixed is empty or above the
// version in use.
type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Fixed    string    `json:"fixed,omitempty"`
}

// vulnMeta is one element of index/vulns.json.
type vulnMeta struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
}

// Summary says what a database holds.
type Summary struct {
	// Modified is the latest modified time of any entry.
	Modified time.Time
	// Entries and Modules count the entries and the modules they affect.
	Entries, Modules int
}

// latestFixed returns the latest version that fixes the entry in ranges, or ""
// if there is none or the entry was introduced again after it: the same rule
// as x/vulndb's osvutils.LatestFixed and govulncheck's NonSupersededFix.
func latestFixed(ranges []osvRange) string {
	var latest string
	for _, r := range ranges {
		if r.Type != "SEMVER" {
			continue
		}
		for _, e := range r.Events {
			if e.Fixed != "" && less(latest, e.Fixed) {
				latest = e.Fixed
			}
		}
		for _, e := range r.Events {
			if e.Introduced != "" && e.Introduced != "0" && less(latest, e.Introduced) {
				latest = ""
				break
			}
		}
	}
	return latest
}

// less compares two OSV versions (no "v"); "" is below every version.
func less(a, b string) bool { return semver.Compare("v"+a, "v"+b) < 0 }

// Generate converts the OSV entries <ID>.json in osvDir into a v1 database in
// out. An entry without a modified time gets snapshot. out must not exist.
func Generate(osvDir string, snapshot time.Time, out string) (Summary, error) {
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil {
		return Summary{}, fmt.Errorf("list %s: %w", osvDir, err)
	}
	if len(files) == 0 {
		return Summary{}, fmt.Errorf("no OSV entries in %s", osvDir)
	}
	for _, d := range []string{"index", "ID"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return Summary{}, fmt.Errorf("create database: %w", err)
		}
	}
	var (
		db      dbMeta
		modules = map[string]*moduleMeta{}
		vulns   []vulnMeta
	)
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return Summary{}, fmt.Errorf("read entry: %w", err)
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return Summary{}, fmt.Errorf("decode %s: %w", file, err)
		}
		if base := filepath.Base(file); base != e.ID+".json" {
			return Summary{}, fmt.Errorf("%s holds entry %q: file name must be <id>.json", file, e.ID)
		}
		if e.Modified.IsZero() {
			e.Modified = snapshot
			if raw, err = setModified(raw, snapshot); err != nil {
				return Summary{}, fmt.Errorf("stamp %s: %w", e.ID, err)
			}
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return Summary{}, fmt.Errorf("write entry: %w", err)
		}
		if e.Modified.After(db.Modified) {
			db.Modified = e.Modified
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		for _, a := range e.Affected {
			m := modules[a.Package.Name]
			if m == nil {
				m = &moduleMeta{Path: a.Package.Name, Vulns: []moduleVuln{}}
				modules[a.Package.Name] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified, Fixed: latestFixed(a.Ranges)})
		}
	}
	mods := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		slices.SortStableFunc(m.Vulns, func(a, b moduleVuln) int { return strings.Compare(a.ID, b.ID) })
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b *moduleMeta) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(vulns, func(a, b vulnMeta) int { return strings.Compare(a.ID, b.ID) })
	for name, v := range map[string]any{"db": db, "modules": mods, "vulns": vulns} {
		b, err := json.Marshal(v)
		if err != nil {
			return Summary{}, fmt.Errorf("encode index %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(out, "index", name+".json"), b, 0o644); err != nil {
			return Summary{}, fmt.Errorf("write index: %w", err)
		}
	}
	return Summary{Modified: db.Modified, Entries: len(vulns), Modules: len(mods)}, nil
}

// setModified rewrites the entry's "modified" field, keeping every other field.
func setModified(raw []byte, t time.Time) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	m, err := json.Marshal(t.UTC())
	if err != nil {
		return nil, err
	}
	fields["modified"] = m
	return json.Marshal(fields)
}

// Ensure writes the database into out unless out already holds one; it
// returns out's summary either way. The database is written beside out and
// renamed into place, so out is either complete or absent.
func Ensure(osvDir string, snapshot time.Time, out string) (Summary, error) {
	if s, err := Read(out); err == nil {
		return s, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Summary{}, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return Summary{}, fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), filepath.Base(out)+".tmp-")
	if err != nil {
		return Summary{}, fmt.Errorf("create temporary database: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Remove(tmp); err != nil { // Generate creates it
		return Summary{}, fmt.Errorf("prepare temporary database: %w", err)
	}
	s, err := Generate(osvDir, snapshot, tmp)
	if err != nil {
		return Summary{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		if s, rerr := Read(out); rerr == nil { // another run got there first
			return s, nil
		}
		return Summary{}, fmt.Errorf("move database into place: %w", err)
	}
	return s, nil
}

// Read returns the summary of the database in dir, from its indexes.
func Read(dir string) (Summary, error) {
	var (
		db   dbMeta
		mods []moduleMeta
		vs   []vulnMeta
	)
	for name, v := range map[string]any{"db": &db, "modules": &mods, "vulns": &vs} {
		b, err := os.ReadFile(filepath.Join(dir, "index", name+".json"))
		if err != nil {
			return Summary{}, fmt.Errorf("read database index: %w", err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return Summary{}, fmt.Errorf("decode database index %s: %w", name, err)
		}
	}
	return Summary{Modified: db.Modified, Entries: len(vs), Modules: len(mods)}, nil
}
