package source

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"recond.dev/recond/reconcile/source/chartspec"
	gitsrc "recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/render"
)

// The seed corpora live in testdata/fuzz/<target>/; the manifests of
// examples/demo-app and of the render tests are added here as well.

// fuzzLimits are small, so that a short run reaches every limit.
var fuzzLimits = Limits{MaxBytes: 32 << 10, MaxObjects: 16, MaxFileBytes: 8 << 10, MaxDepth: 16, MaxAliasExpansion: 4}

// demoManifests are the files of examples/demo-app.
func demoManifests(f *testing.F) [][]byte {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "demo-app", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("examples/demo-app: %v (%d files)", err, len(files))
	}
	var out [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzDecode feeds any file to the manifest decoder: it never panics, is
// deterministic, fails only with a *ManifestError, and what it accepts is
// within the limits, names apiVersion, kind and name, and can be sent to the
// API server as JSON.
func FuzzDecode(f *testing.F) {
	for _, b := range demoManifests(f) {
		f.Add(b)
	}
	f.Add([]byte(cmYAML("a", "k: v")))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}]}`))
	f.Add([]byte("a: &a [1, 2]\nb: [*a, *a]\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: n\ndata:\n  big: 12345678901234567890\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := render.NewBudget(fuzzLimits)
		ms, err := b.Decode("f.yaml", data)
		again, err2 := render.NewBudget(fuzzLimits).Decode("f.yaml", data)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(objects(ms), objects(again)) {
			t.Fatalf("decode is not deterministic: %v %v, then %v %v", objects(ms), err, objects(again), err2)
		}
		if err != nil {
			checkRenderError(t, err)
			if ms != nil {
				t.Fatalf("error %v with %d objects", err, len(ms))
			}
			return
		}
		checkManifests(t, ms, b)
	})
}

// renderTimeout bounds one render of the small trees FuzzKustomize builds;
// a render that takes longer is a finding.
const renderTimeout = 5 * time.Second

// outsideMarker is the content of files that a render must never read: one
// on the disk, outside the repository, and one in the repository outside
// every kustomization root.
const outsideMarker = "q7z-outside-the-root"

// outsideDir is the directory on the disk holding a manifest outside the
// repository; the seeds name it.
var outsideDir = filepath.Join(os.TempDir(), "recond-fuzz-outside")

// FuzzKustomize builds a kustomization from any kustomization.yaml, two
// resource files (or a symbolic link), and a second kustomization in base/,
// under small limits. The render never panics, fails only with a
// *ManifestError whose limits are the ones in force, stays within them, and
// never shows a file outside the repository or, without a link, outside the
// kustomization roots.
func FuzzKustomize(f *testing.F) {
	demo := demoManifests(f)
	f.Add("resources:\n- a.yaml\n- b.yaml\n", demo[0], demo[1], "", "")
	f.Add("resources:\n- a.yaml\n- ../base\nnamePrefix: prod-\n", []byte(cmYAML("extra", "k: v")), []byte(nil), "resources:\n- cm.yaml\n", "")
	f.Add("resources:\n- b.yaml\n", demo[2], []byte(nil), "", "base/cm.yaml")
	f.Add("resources:\n- b.yaml\n", demo[2], []byte(nil), "", "../outside/cm.yaml")
	f.Add("resources:\n- ../outside/cm.yaml\n", []byte(nil), []byte(nil), "", "")
	f.Add("resources:\n- "+filepath.Join(outsideDir, "cm.yaml")+"\n", []byte(nil), []byte(nil), "", "")
	f.Add("resources:\n- ../../../../.."+filepath.Join(outsideDir, "cm.yaml")+"\n", []byte(nil), []byte(nil), "", "")
	f.Add("resources:\n- ../base\n", []byte(nil), []byte(nil), "resources:\n- ../outside/cm.yaml\n", "")
	f.Add("configMapGenerator:\n- name: gen\n  files:\n  - a.yaml\n  - ../outside/cm.yaml\n", demo[0], []byte(nil), "", "")
	f.Add("resources:\n- a.yaml\npatches:\n- path: b.yaml\n", []byte(cmYAML("cfg", "k: v")), []byte(cmYAML("cfg", "k: w")), "", "")
	f.Add("resources:\n- a.yaml\n", []byte("a: &a [1, 2, 3, 4]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"), []byte(nil), "", "")
	f.Add("resources:\n- https://example.com/cm.yaml\n", []byte(nil), []byte(nil), "", "")
	f.Add("helmCharts:\n- name: x\n", []byte(nil), []byte(nil), "", "")

	if err := os.MkdirAll(outsideDir, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outsideDir, "cm.yaml"), []byte(cmYAML("disk", "k: "+outsideMarker)), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kustomization string, a, b []byte, base, link string) {
		files := map[string]treeEntry{
			"app/kustomization.yaml": {data: kustomization},
			"app/a.yaml":             {data: string(a)},
			"app/b.yaml":             {data: string(b)},
			"outside/cm.yaml":        {data: cmYAML("repo", "k: "+outsideMarker)},
			"base/cm.yaml":           {data: cmYAML("base", "k: v")},
		}
		if link != "" {
			files["app/b.yaml"] = treeEntry{data: link, link: true}
		}
		if base != "" {
			files["base/kustomization.yaml"] = treeEntry{data: base}
		}
		root, err := memTree(files)
		if err != nil {
			t.Skip(err) // a name go-git cannot store
		}
		bud := render.NewBudget(fuzzLimits)
		ctx, cancel := context.WithTimeout(context.Background(), renderTimeout)
		defer cancel()
		out, err := kustomize.InProcess(ctx, gitsrc.Dir(root), "app", bud, helm.Request{Request: chartspec.Request{Release: "release-name"}})
		var ms []Manifest
		if err == nil {
			ms, err = bud.Decode(kustomize.Label("app"), out)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("render of a small tree took more than %s", renderTimeout)
		}
		if err != nil {
			checkRenderError(t, err)
			return
		}
		checkManifests(t, ms, bud)
		out, err = json.Marshal(objects(ms))
		if err != nil {
			t.Fatalf("rendered objects do not marshal: %v", err)
		}
		inputs := kustomization + string(a) + string(b) + base + link
		if strings.Contains(string(out), outsideMarker) && !strings.Contains(inputs, outsideMarker) &&
			(link == "" || strings.Contains(string(out), `"disk"`)) {
			t.Fatalf("render shows a file outside the kustomization roots: %s", out)
		}
	})
}

// objects returns the objects of ms.
func objects(ms []Manifest) []map[string]any {
	var out []map[string]any
	for _, m := range ms {
		out = append(out, m.Object.Object)
	}
	return out
}

// checkRenderError fails unless err is a *ManifestError, and, when it is
// a limit, one of the limits in force that was really exceeded.
func checkRenderError(t *testing.T, err error) {
	t.Helper()
	var me *ManifestError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *ManifestError", err, err)
	}
	var le *LimitError
	if !errors.As(err, &le) {
		return
	}
	want := map[string]int64{
		LimitBytes: fuzzLimits.MaxBytes, LimitObjects: int64(fuzzLimits.MaxObjects),
		LimitFileBytes: fuzzLimits.MaxFileBytes, LimitDepth: int64(fuzzLimits.MaxDepth),
		LimitAliasExpansion: -1, // a multiple of the document's size
	}
	max, ok := want[le.Limit]
	switch {
	case !ok || le.Flag != render.LimitFlag(le.Limit):
		t.Fatalf("limit error %v: unknown limit %q or flag %q", err, le.Limit, le.Flag)
	case max >= 0 && le.Max != max:
		t.Fatalf("limit error %v: max %d, the limit in force is %d", err, le.Max, max)
	case le.Value <= le.Max:
		t.Fatalf("limit error %v: %d is within the limit %d", err, le.Value, le.Max)
	}
}

// checkManifests fails unless ms is within the limits and every object
// names apiVersion, kind and name.
func checkManifests(t *testing.T, ms []Manifest, b *render.Budget) {
	lim := b.Limits()
	t.Helper()
	if len(ms) > lim.MaxObjects {
		t.Fatalf("%d objects, over the limit %d", len(ms), lim.MaxObjects)
	}
	if n := b.BytesRead(); n > lim.MaxBytes {
		t.Fatalf("read %d bytes, over the limit %d", n, lim.MaxBytes)
	}
	for _, m := range ms {
		u := m.Object
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s: object without apiVersion, kind or name: %v", m.File, u.Object)
		}
		if d := depth(u.Object); d > int64(lim.MaxDepth) {
			t.Fatalf("%s: depth %d, over the limit %d", m.File, d, lim.MaxDepth)
		}
		if _, err := u.MarshalJSON(); err != nil {
			t.Fatalf("%s: accepted an object that does not marshal: %v", m.File, err)
		}
	}
}

func cmYAML(name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  " + data + "\n"
}

// treeEntry is a file of memTree: content, or a symbolic link's target.
type treeEntry struct {
	data string
	link bool
}

// memTree stores files (slash-separated paths) as a tree in an in-memory
// repository and returns it.
func memTree(files map[string]treeEntry) (*object.Tree, error) {
	st := memory.NewStorage()
	var build func(dir string) (plumbing.Hash, error)
	build = func(dir string) (plumbing.Hash, error) {
		t := &object.Tree{}
		subdirs := map[string]bool{}
		for p, e := range files {
			rel, ok := strings.CutPrefix(p, dir)
			if !ok {
				continue
			}
			if first, _, nested := strings.Cut(rel, "/"); nested {
				if !subdirs[first] {
					subdirs[first] = true
					h, err := build(dir + first + "/")
					if err != nil {
						return plumbing.ZeroHash, err
					}
					t.Entries = append(t.Entries, object.TreeEntry{Name: first, Mode: filemode.Dir, Hash: h})
				}
				continue
			}
			obj := st.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, err := obj.Writer()
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if _, err := w.Write([]byte(e.data)); err != nil {
				return plumbing.ZeroHash, err
			}
			if err := w.Close(); err != nil {
				return plumbing.ZeroHash, err
			}
			h, err := st.SetEncodedObject(obj)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			mode := filemode.Regular
			if e.link {
				mode = filemode.Symlink
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: path.Base(rel), Mode: mode, Hash: h})
		}
		// Git orders a directory as if its name ended in "/".
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
		obj := st.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return st.SetEncodedObject(obj)
	}
	h, err := build("")
	if err != nil {
		return nil, err
	}
	return object.GetTree(st, h)
}

// depth is the nesting depth of maps and lists in v.
func depth(v any) int64 {
	var d int64
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depth(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, depth(e))
		}
		return d + 1
	}
	return 0
}
