package reconcile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
)

// corpusDir holds manifests copied from public projects; its README names
// the source, path, commit and licence of every file and what was changed.
const corpusDir = "testdata/corpus"

// The corpus must not shrink silently: these are the least it holds.
const (
	corpusMinObjects = 150
	corpusMinKinds   = 15
)

// readCorpus returns every manifest file of the corpus (path relative to
// corpusDir -> content) and the objects they hold.
func readCorpus(t *testing.T) (map[string]string, []*unstructured.Unstructured) {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(corpusDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".json":
		default:
			return nil // README.md
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(corpusDir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(files[name]), 4096)
		for doc := 1; ; doc++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: document %d: %v", path.Join(corpusDir, name), doc, err)
			}
			raw = bytes.TrimSpace(raw)
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				t.Fatalf("%s: document %d: %v", path.Join(corpusDir, name), doc, err)
			}
			objs = append(objs, u)
		}
	}
	return files, objs
}

// TestCorpusSize keeps the corpus from shrinking below what the real-world
// check needs, and keeps it free of what recond refuses (objects of another
// namespace).
func TestCorpusSize(t *testing.T) {
	_, objs := readCorpus(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if ns := o.GetNamespace(); ns != "" {
			t.Errorf("%s/%s sets metadata.namespace %q; the corpus must not", o.GetKind(), o.GetName(), ns)
		}
	}
	if len(objs) < corpusMinObjects {
		t.Errorf("corpus holds %d objects, want at least %d", len(objs), corpusMinObjects)
	}
	if len(kinds) < corpusMinKinds {
		t.Errorf("corpus holds %d kinds (%v), want at least %d", len(kinds), kinds, corpusMinKinds)
	}
	for _, k := range []string{
		"Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding",
		"StatefulSet", "DaemonSet", "CronJob", "Job", "Ingress", "NetworkPolicy", "PodDisruptionBudget",
		"HorizontalPodAutoscaler", "LimitRange", "ResourceQuota", "PersistentVolumeClaim", "Pod",
	} {
		if kinds[k] == 0 {
			t.Errorf("corpus holds no %s", k)
		}
	}
}

// TestCorpusFirstSyncAppliesAllThenConverges is the real-world check: the
// manifests of several public projects, synced into one namespace, are all
// created by the first tick, and the next ticks find nothing to write. An
// object the local comparison keeps reporting is a perpetual diff: every
// remaining change is printed.
func TestCorpusFirstSyncAppliesAllThenConverges(t *testing.T) {
	files, objs := readCorpus(t)
	h := newHarness(t)
	h.repo.Commit("corpus", files)

	r := h.tick()
	if r.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("first tick outcome = %s, want %s (failure: %v)", r.Outcome, reconcile.OutcomeApplied, r.Failure())
	}
	if r.Counts.Desired != len(objs) {
		t.Errorf("first tick desired %d objects, corpus holds %d", r.Counts.Desired, len(objs))
	}
	created := 0
	for _, op := range r.Ops {
		if op.Err != nil {
			t.Errorf("%s/%s: %s failed: %v", op.Kind, op.Name, op.Action, op.Err)
		}
		if op.Action == diff.Create && op.Err == nil {
			created++
		}
	}
	if created != len(objs) || r.Counts.Created != len(objs) {
		t.Errorf("first tick created %d objects (counted %d), want %d", created, r.Counts.Created, len(objs))
	}

	for i := 2; i <= 4; i++ {
		r := h.tick()
		if r.Outcome == reconcile.OutcomeConverged && len(r.Ops) == 0 && len(r.Changes) == 0 {
			continue
		}
		var b strings.Builder
		for _, c := range r.Changes {
			b.WriteString("\n")
			b.WriteString(c.String())
		}
		t.Errorf("tick %d: outcome %s (failure: %v), %d writes, %d changes, want converged with none:%s",
			i, r.Outcome, r.Failure(), len(r.Ops), len(r.Changes), b.String())
	}
}
