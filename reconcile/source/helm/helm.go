package helm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	cutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	loaderv2 "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/kustomize/api/sealed"
	sigsyaml "sigs.k8s.io/yaml"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/sops"
	"recond.dev/recond/reconcile/source/tree"
)

// ChartFile is the file whose presence in --path makes it a Helm chart.
const ChartFile = chartspec.File

// Request is what rendering a chart needs besides the chart itself: what
// crosses the worker's pipe (chartspec.Request), and how this render
// is made.
type Request struct {
	chartspec.Request

	// standIns makes the key and certificate makers return cheap values
	// that differ at every call (the second render of generated-once
	// detection).
	standIns bool

	// inline are values documents merged after Values (a kustomization's
	// helmCharts entry); never on the pipe: kustomize runs where they are
	// read.
	inline [][]byte
}

// The lines of a chart render's output that say what it left out, before
// the objects: one per CRD file of crds/ (recond's Role cannot create
// CustomResourceDefinitions) and one per hook object ("Kind/name
// (events)"), which are not applied.
const (
	skippedCRD  = "# recond-skipped-crd: "
	skippedHook = "# recond-skipped-hook: "
	// chartLine names the chart and its version, first.
	chartLine = "# recond-chart: "
)

// Chart is what the status page says of a chart at Config.Path.
type Chart = chartspec.Chart

// Label names a chart's render in errors: "helm template <dir>".
func Label(dir string) string { return chartspec.Label(dir) }

// Build renders the chart at dir of the commit's tree, sealed: every
// file is read through the bounded tree file system (symbolic links only
// inside the repository), dependencies only from the chart's charts/,
// lookup returns nothing, DNS is never asked, a values schema's $ref
// never leaves the chart, and the random and time functions are repeatable
// (helmfuncs.go). It returns the objects as YAML documents, each after a
// "# Source: <template>" line, and what it left out.
func Build(ctx context.Context, root tree.Dir, dir string, b *render.Budget, req Request) (out []byte, err error) {
	label := Label(dir)
	defer func() { err = b.Safe(err) }()
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, render.Fault(fmt.Errorf("helm failed: %v", p), label)
		}
	}()
	tfs := render.NewFS(ctx, root, b)
	in, err := readChart(tfs, dir, req)
	if err != nil {
		return nil, render.Fault(err, label)
	}
	// Objects whose text the key and certificate makers (or a random salt)
	// changed are found by rendering a second time, with stand-ins: they
	// are created when missing and never rewritten because of them. The
	// second render starts, beside the first, at the first such call: it
	// reads nothing again (the files and values read once), and checks
	// nothing again (the same values meet the same schema).
	standIn := in.standInRender(ctx, req)
	files, gen, ch, err := in.render(ctx, req, true, standIn.start)
	if err != nil {
		return nil, render.Fault(err, label)
	}
	var again map[string]string
	if gen > 0 {
		if again, err = standIn.wait(); err != nil {
			return nil, render.Fault(err, label)
		}
	}
	if err := tfs.Err(); err != nil {
		return nil, render.Fault(err, label)
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, &render.ManifestError{File: label, Err: err}
	}
	generated := map[int][][]string{} // manifest index -> the fields the stand-ins changed
	inputs := map[int]string{}        // manifest index -> AnnotationGeneratedInputs
	if again != nil {
		_, manifests2, err := releaseutil.SortManifests(again, nil, releaseutil.InstallOrder)
		if err != nil {
			return nil, &render.ManifestError{File: label, Err: err}
		}
		// A generated field may be made from a decrypted value: its
		// fingerprint is then keyed with the instance's seed.
		var key []byte
		if len(b.SecretValues()) > 0 {
			if len(req.Seed) == 0 {
				return nil, &render.ManifestError{File: label, Err: fmt.Errorf("a key or certificate maker with SOPS-encrypted values: %w", ErrNoSeed)}
			}
			key = req.Seed
		}
		for i, m := range manifests {
			if i < len(manifests2) && manifests2[i].Name == m.Name && manifests2[i].Content == m.Content {
				continue
			}
			var a, b map[string]any
			if i >= len(manifests2) || manifests2[i].Name != m.Name ||
				sigsyaml.Unmarshal([]byte(m.Content), &a) != nil || sigsyaml.Unmarshal([]byte(manifests2[i].Content), &b) != nil {
				generated[i] = [][]string{{}} // the whole object
				continue
			}
			generated[i] = differingPaths(a, b, nil, nil)
			inputs[i] = generatedInputs(b, generated[i], key)
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s%s %s\n", chartLine, oneLine(ch.Name()), oneLine(ch.Metadata.Version))
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&buf, "%s%s\n", skippedCRD, oneLine(crd.Filename))
	}
	var applied []*release.Hook
	for _, h := range hooks {
		if appliedHook(h) {
			applied = append(applied, h)
			continue
		}
		fmt.Fprintf(&buf, "%s%s\n", skippedHook, oneLine(fmt.Sprintf("%s/%s (%s)", h.Kind, h.Name, hookEvents(h))))
	}
	write := func(src string, meta DocMeta, content string) error {
		line, _ := json.Marshal(meta)
		fmt.Fprintf(&buf, "%s%s\n%s%s\n%s\n", docStart, oneLine(src), metaLine, line, content)
		if n := int64(buf.Len()); n > b.Limits().MaxBytes {
			return render.NewLimitError(render.LimitBytes, n, b.Limits().MaxBytes, label)
		}
		return nil
	}
	for i, m := range manifests {
		if err := write(m.Name, DocMeta{Generated: generated[i], Inputs: inputs[i]}, m.Content); err != nil {
			return nil, err
		}
	}
	for _, h := range applied {
		if err := write(h.Path, DocMeta{Hook: true}, h.Manifest); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Each document of Build's output starts with docStart and the
// template's name, then metaLine and its DocMeta: the line is always
// there, so that no template's own output can pass for it.
const (
	docStart = "---\n# Source: "
	metaLine = "# recond: "
)

// DocMeta is what recond says of one document of a chart's output.
type DocMeta struct {
	// Hook: a hook recond runs (helm.sh/hook).
	Hook bool `json:"hook,omitempty"`
	// Generated are the fields (paths of keys) that a key or certificate
	// maker made; one empty path stands for the whole object.
	Generated [][]string `json:"generated,omitempty"`
	// Inputs is the object's AnnotationGeneratedInputs (helmgenerated.go).
	Inputs string `json:"inputs,omitempty"`
}

// differingPaths are the paths of the leaves (or subtrees) at which a and b
// differ.
func differingPaths(a, b any, at []string, out [][]string) [][]string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			out = append(out, slices.Clone(at))
		}
		return out
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		out = differingPaths(am[k], bm[k], append(at, k), out)
	}
	return out
}

// chartInput is what rendering a chart reads, read once: the chart's
// files, the chart loaded from them, and its values merged.
type chartInput struct {
	dir   string
	files []*archive.BufferedFile
	ch    *chartv2.Chart
	vals  map[string]any
	// signed: the chart's templates call genSignedCert (keyPool).
	signed bool
}

// readChart reads the chart at dir and the values req names, and checks
// them: the chart's kind and dependencies, the values files' bounds.
func readChart(tfs *render.FS, dir string, req Request) (*chartInput, error) {
	label := Label(dir)
	files, err := readChartFiles(tfs, dir)
	if err != nil {
		return nil, err
	}
	ch, err := loadFiles(dir, files)
	if err != nil {
		return nil, err
	}
	vals, err := helmValues(tfs, req.Values)
	if err != nil {
		return nil, err
	}
	for i, doc := range req.inline {
		if err := tfs.Budget().Inspect(label, doc, false); err != nil {
			return nil, err
		}
		cur, err := loaderv2.LoadValues(bytes.NewReader(doc))
		if err != nil {
			return nil, &render.ManifestError{File: label, Err: fmt.Errorf("values %d: %w", i+1, err)}
		}
		vals = loaderv2.MergeMaps(vals, cur)
	}
	return &chartInput{dir: dir, files: files, ch: ch, vals: vals, signed: callsSigned(files)}, nil
}

// render merges the values, checks them (first: the render that checks
// the values against the chart's schemas) and renders every template of
// the chart, loaded afresh from its files unless first (rendering changes
// a loaded chart; a render that is not first has values of its own). It returns the rendered files (NOTES.txt left out), how many
// calls the functions whose output cannot be repeated had, and the chart
// as rendered. onGenerated is called at the first such call.
func (in *chartInput) render(ctx context.Context, req Request, first bool, onGenerated func()) (map[string]string, int64, *chartv2.Chart, error) {
	dir, label := in.dir, Label(in.dir)
	ch, vals := in.ch, in.vals
	if !first {
		var err error
		if ch, err = loadFiles(dir, cloneFiles(in.files)); err != nil {
			return nil, 0, nil, err
		}
	}
	caps, err := helmCapabilities(req)
	if err != nil {
		return nil, 0, nil, err
	}
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, 0, nil, &render.ManifestError{File: path.Join(dir, ChartFile), Err: fmt.Errorf("chart requires kubeVersion %s, which is incompatible with Kubernetes %s", kv, caps.KubeVersion.String())}
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, 0, nil, &render.ManifestError{File: path.Join(dir, ChartFile), Err: err}
	}
	opts := common.ReleaseOptions{Name: req.Release, Namespace: req.Namespace, Revision: 1, IsInstall: true}
	rv, err := cutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, true)
	if err != nil {
		return nil, 0, nil, &render.ManifestError{File: label, Err: fmt.Errorf("values: %w", err)}
	}
	if first {
		if err := validateSchemas(ch, rv["Values"].(common.Values)); err != nil {
			return nil, 0, nil, &render.ManifestError{File: label, Err: err}
		}
	}
	gen := &generatedCalls{onFirst: onGenerated}
	var keys *keyPool
	if !req.standIns {
		keys = &keyPool{signed: in.signed}
	}
	e := engine.Engine{CustomTemplateFuncs: sealedFuncs(req, gen, keys)}
	files, err := e.RenderWithContext(ctx, ch, rv)
	if err != nil {
		return nil, 0, nil, &render.ManifestError{File: label, Err: err}
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	return files, gen.n.Load(), ch, nil
}

// standInRender is the render with stand-ins of a chart, which start
// starts (once; the first render's first call of a generated-once
// function) and wait waits for (starting it if it did not start).
type standInRender struct {
	once  sync.Once
	done  chan struct{}
	files map[string]string
	err   error
	run   func()
}

func (in *chartInput) standInRender(ctx context.Context, req Request) *standInRender {
	s := &standInRender{done: make(chan struct{})}
	again := req
	again.standIns = true
	// Values of its own, copied before the first render starts.
	own := *in
	own.vals = copyValues(in.vals)
	s.run = func() {
		defer close(s.done)
		defer func() {
			if p := recover(); p != nil {
				s.files, s.err = nil, fmt.Errorf("helm failed: %v", p)
			}
		}()
		s.files, _, _, s.err = own.render(ctx, again, false, nil)
	}
	return s
}

func (s *standInRender) start() { s.once.Do(func() { go s.run() }) }

func (s *standInRender) wait() (map[string]string, error) {
	s.start()
	<-s.done
	return s.files, s.err
}

// cloneFiles copies the list of a chart's files (the loader renames the
// ones of a subchart), sharing their content.
func cloneFiles(files []*archive.BufferedFile) []*archive.BufferedFile {
	out := make([]*archive.BufferedFile, len(files))
	for i, f := range files {
		c := *f
		out[i] = &c
	}
	return out
}

// copyValues is a deep copy of values as the values loader makes them
// (maps, lists and scalars).
func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}
	return out
}

func copyValue(x any) any {
	switch x := x.(type) {
	case map[string]any:
		return copyValues(x)
	case common.Values:
		return common.Values(copyValues(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	}
	return x
}

// appliedHook reports whether recond runs hook h: one of its events is
// pre-install, pre-upgrade, post-install or post-upgrade. Test, rollback
// and delete hooks are left out.
func appliedHook(h *release.Hook) bool {
	for _, e := range h.Events {
		switch e {
		case release.HookPreInstall, release.HookPreUpgrade, release.HookPostInstall, release.HookPostUpgrade:
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// Document is one template's output.
type Document struct {
	Source  string // the template, "<chart>/templates/x.yaml"
	Content []byte
	Meta    DocMeta
}

// SplitOutput reads Build's output back: each template's
// document, and what was left out. A document never holds a "---" line
// (releaseutil.SortManifests split them), so the separator is unambiguous.
func SplitOutput(out []byte) (docs []Document, chart Chart, crds, hooks []string) {
	const sep = docStart
	head, rest, found := bytes.Cut(out, []byte(sep))
	for _, l := range strings.Split(string(head), "\n") {
		if v, ok := strings.CutPrefix(l, chartLine); ok {
			chart.Name, chart.Version, _ = strings.Cut(v, " ")
		} else if v, ok := strings.CutPrefix(l, skippedCRD); ok {
			crds = append(crds, v)
		} else if v, ok := strings.CutPrefix(l, skippedHook); ok {
			hooks = append(hooks, v)
		}
	}
	if !found {
		return nil, chart, crds, hooks
	}
	for _, part := range bytes.Split(rest, []byte("\n"+sep)) {
		src, content, _ := bytes.Cut(part, []byte("\n"))
		d := Document{Source: string(src)}
		if meta, rest, ok := bytes.Cut(content, []byte("\n")); ok && bytes.HasPrefix(meta, []byte(metaLine)) {
			_ = json.Unmarshal(meta[len(metaLine):], &d.Meta)
			content = rest
		}
		d.Content = content
		docs = append(docs, d)
	}
	return docs, chart, crds, hooks
}

func hookEvents(h *release.Hook) string {
	ev := make([]string, len(h.Events))
	for i, e := range h.Events {
		ev[i] = string(e)
	}
	return strings.Join(ev, ",")
}

// linkedDirectory is the error of an entry rel of the chart at dir that is
// a symbolic link to the directory target: a subchart (charts/<name>, or
// a link in it) or any other.
func linkedDirectory(dir, rel, target string) error {
	what := rel
	if rel == "charts" {
		what = "charts, the directory of its subcharts,"
	} else if sub, ok := strings.CutPrefix(rel, "charts/"); ok {
		name, _, _ := strings.Cut(sub, "/")
		what = fmt.Sprintf("subchart %s (%s)", strings.TrimSuffix(strings.TrimSuffix(name, ".tgz"), ".tar.gz"), rel)
	}
	return &render.ManifestError{File: path.Join(dir, rel), Err: fmt.Errorf("%s is a symbolic link to the directory %s: recond follows links "+
		"to files only, never to a directory; copy the directory there (for a subchart, its files under charts/<name>/ "+
		"or its packaged .tgz), or link its files one by one", what, target)}
}

// readChartFiles reads the files of the chart at dir through tfs, as `helm
// template` reads a chart directory: .helmignore honoured, a UTF-8 byte
// order mark dropped. It walks the chart's directories as tfs.Walk does
// (symbolic links are read through tfs, which follows them only inside
// the repository). A template is read within the budget's bounds, but not
// inspected as YAML: it is the text of a template, never parsed as YAML
// (its output is, when it is decoded); every other file is read as any
// file of a render (render.FS.ReadRaw).
func readChartFiles(tfs *render.FS, dir string) ([]*archive.BufferedFile, error) {
	top := render.Abs(dir)
	rules := ignore.Empty()
	if data, err := tfs.ReadFile(path.Join(top, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, &render.ManifestError{File: path.Join(dir, ignore.HelmIgnore), Err: err}
		}
	}
	rules.AddDefaults()
	n, err := tfs.Lookup(top)
	if err != nil {
		return nil, err
	}
	if n.Dir == nil {
		return nil, nil // no chart there: the loader says so
	}
	r := chartReader{tfs: tfs, dir: dir, rules: rules}
	if err := r.walk(n.Dir, n.Path, ""); err != nil {
		return nil, err
	}
	return r.files, nil
}

// chartReader reads a chart's files (readChartFiles).
type chartReader struct {
	tfs   *render.FS
	dir   string
	rules *ignore.Rules
	files []*archive.BufferedFile
}

// walk reads the directory d of the chart, at the repository-relative
// path at and the chart-relative path rel ("" for the chart itself).
func (r *chartReader) walk(d tree.Dir, at, rel string) error {
	ctx := r.tfs.Context()
	for _, e := range d.Entries() {
		if err := ctx.Err(); err != nil {
			return err
		}
		erel, eat := path.Join(rel, e.Name), path.Join(at, e.Name)
		switch e.Kind {
		case tree.KindDir:
			if r.rules.Ignore(erel, entryInfo{name: e.Name, dir: true}) {
				continue
			}
			sub, err := d.Dir(e.Name)
			if err != nil {
				return err
			}
			if err := r.walk(sub, eat, erel); err != nil {
				return err
			}
		case tree.KindFile, tree.KindSymlink:
			f, err := d.File(e.Name)
			if err != nil {
				continue // as tfs.Walk: not a file it can read
			}
			if r.rules.Ignore(erel, entryInfo{name: e.Name, size: f.Size()}) {
				continue
			}
			if err := r.read(e.Kind, f, eat, erel); err != nil {
				return err
			}
		}
	}
	return nil
}

// read reads the file f at the repository-relative path at (the chart's
// rel): a regular template straight from the tree, anything else through
// tfs (a link, resolved).
func (r *chartReader) read(kind tree.EntryKind, f tree.File, at, rel string) error {
	tfs, p := r.tfs, render.Abs(at)
	var data []byte
	var err error
	switch {
	case isTemplate(rel) && kind == tree.KindFile:
		data, err = tfs.Budget().ReadFile(at, f)
	case isTemplate(rel):
		data, err = readTemplate(tfs, p)
	default:
		data, err = tfs.ReadRaw(p)
	}
	if err != nil {
		if n, lerr := tfs.Lookup(p); lerr == nil && n.File == nil {
			return linkedDirectory(r.dir, rel, n.Path)
		}
		return err
	}
	if base := path.Base(rel); (base == "values.yaml" || base == "values.schema.json") && render.MaybeSOPS(data) &&
		(sops.Encrypted(sops.YAML, data) || sops.Encrypted(sops.JSON, data) ||
			sops.Stripped(sops.YAML, data) != nil || sops.Stripped(sops.JSON, data) != nil) {
		// Helm would render its ciphertext: say where encrypted values go.
		return &render.ManifestError{File: path.Join(r.dir, rel), Err: &render.DecryptError{File: path.Join(r.dir, rel), Err: errors.New(
			"SOPS-encrypted: a chart's own values are read as committed; give encrypted values with --" + FlagValues)}}
	}
	r.files = append(r.files, &archive.BufferedFile{Name: rel, Data: bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))})
	return nil
}

// entryInfo is a directory entry as .helmignore's rules read one.
type entryInfo struct {
	name string
	dir  bool
	size int64
}

func (i entryInfo) Name() string { return i.name }
func (i entryInfo) Size() int64  { return i.size }
func (i entryInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o555
	}
	return 0o444
}
func (i entryInfo) ModTime() time.Time { return time.Time{} }
func (i entryInfo) IsDir() bool        { return i.dir }
func (i entryInfo) Sys() any           { return nil }

// isTemplate reports whether rel, a path in a chart, is one of its
// templates or of a subchart's (charts/<name>/templates/...): Helm
// loads it as the text of a template.
func isTemplate(rel string) bool {
	for {
		if strings.HasPrefix(rel, "templates/") {
			return true
		}
		sub, ok := strings.CutPrefix(rel, "charts/")
		if !ok {
			return false
		}
		if _, rel, ok = strings.Cut(sub, "/"); !ok {
			return false
		}
	}
}

// readTemplate reads the file at p (in the mount) within the budget's
// bounds (its size, the bytes left), without inspecting it as YAML.
func readTemplate(tfs *render.FS, p string) ([]byte, error) {
	n, err := tfs.Lookup(p)
	if err != nil {
		return nil, err
	}
	if n.File == nil {
		return nil, fmt.Errorf("%s: is a directory", n.Path)
	}
	if err := tfs.Context().Err(); err != nil {
		return nil, err
	}
	return tfs.Budget().ReadFile(n.Path, n.File)
}

// loadFiles loads the chart at dir from its files. Only apiVersion v1 and
// v2 application charts are rendered, and every dependency Chart.yaml
// names must be in the chart's charts/ (nothing is ever downloaded).
func loadFiles(dir string, files []*archive.BufferedFile) (*chartv2.Chart, error) {
	ch, err := loaderv2.LoadFiles(files)
	if err != nil {
		return nil, &render.ManifestError{File: dir, Err: fmt.Errorf("load chart: %w", err)}
	}
	switch ch.Metadata.APIVersion {
	case chartv2.APIVersionV1, chartv2.APIVersionV2:
	default:
		return nil, &render.ManifestError{File: path.Join(dir, ChartFile), Err: fmt.Errorf("chart apiVersion %q is not supported (v1 or v2)", ch.Metadata.APIVersion)}
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return nil, &render.ManifestError{File: path.Join(dir, ChartFile), Err: fmt.Errorf("%s charts are not installable", t)}
	}
	if err := checkDependencies(ch); err != nil {
		return nil, &render.ManifestError{File: path.Join(dir, ChartFile), Err: err}
	}
	return ch, nil
}

// checkDependencies fails when a dependency Chart.yaml names is not in
// charts/ (at any depth), naming the chart and the dependency.
func checkDependencies(ch *chartv2.Chart) error {
	var missing []string
	for _, want := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(d *chartv2.Chart) bool { return d.Name() == want.Name }) {
			missing = append(missing, want.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("chart %s: dependencies not in its charts/ directory: %s (recond downloads nothing: vendor them, e.g. `helm dependency build`, and commit charts/)",
			ch.Name(), strings.Join(missing, ", "))
	}
	for _, d := range ch.Dependencies() {
		if err := checkDependencies(d); err != nil {
			return err
		}
	}
	return nil
}

// helmValues merges the values files (repository-relative paths) in
// order, later ones winning, as `helm template -f a -f b` does.
func helmValues(tfs *render.FS, files []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		n, err := tfs.Lookup(render.Abs(path.Clean(f)))
		var data []byte
		if err == nil {
			// A values file may be SOPS-encrypted (decrypt.go).
			tfs.Budget().SetRole(n.Path, render.RoleValues)
			data, err = tfs.Read(n)
		}
		if err != nil {
			var (
				me *render.ManifestError
				de *render.DecryptError
			)
			if errors.As(err, &me) || errors.As(err, &de) {
				return nil, err
			}
			return nil, &render.ManifestError{File: f, Err: fmt.Errorf("values file (--%s): %w", FlagValues, err)}
		}
		if err := tfs.Budget().Inspect(f, data, false); err != nil {
			return nil, err
		}
		cur, err := loaderv2.LoadValues(bytes.NewReader(data))
		if err != nil {
			return nil, &render.ManifestError{File: f, Err: fmt.Errorf("values file (--%s): %w", FlagValues, err)}
		}
		vals = loaderv2.MergeMaps(vals, cur)
	}
	return vals, nil
}

// helmCapabilities is .Capabilities: the API server's version and API
// versions when known, else what this build knows.
func helmCapabilities(req Request) (*common.Capabilities, error) {
	caps := common.DefaultCapabilities.Copy()
	if req.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(req.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kubernetes version %q: %w", req.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	if len(req.APIVersions) > 0 {
		caps.APIVersions = common.VersionSet(slices.Clone(req.APIVersions))
	}
	return caps, nil
}

// sealedFuncs replaces the template functions whose result would depend
// on something else than the commit: time, randomness, DNS, the cluster.
func sealedFuncs(req Request, gen *generatedCalls, keys *keyPool) template.FuncMap {
	fm := repeatableFuncs(req.Seed, req.Now)
	for name, fn := range generatedOnceFuncs(gen, req.standIns, keys) {
		fm[name] = fn
	}
	fm["lookup"] = func(string, string, string, string) (map[string]any, error) { return map[string]any{}, nil }
	fm["getHostByName"] = func(string) string { return "" }
	return fm
}

// KustomizeChart renders one of a kustomization's helmCharts entries with
// the same engine, bounds and sealing as a chart at --path: the chart is
// read from the repository (helmGlobals.chartHome), never downloaded. Its
// output is what `helm template` prints: the objects, the hooks (unless
// skipHooks; test hooks unless skipTests) and, with includeCRDs, crds/.
func KustomizeChart(ctx context.Context, tfs *render.FS, base Request, hr sealed.HelmRequest) ([]byte, error) {
	if base.CapsErr != "" {
		return nil, errors.New(base.CapsErr)
	}
	dir, ok := strings.CutPrefix(path.Clean(hr.ChartDir), render.Mount+"/")
	if !ok {
		return nil, fmt.Errorf("helm chart %s: outside the repository", hr.ChartDir)
	}
	if n, err := tfs.Lookup(render.Abs(dir)); err != nil || n.Dir == nil {
		return nil, fmt.Errorf("helm chart %s: no chart directory there (recond downloads nothing: vendor the chart under helmGlobals.chartHome)", dir)
	}
	req := base
	req.Release, req.Values, req.inline = cmp.Or(hr.ReleaseName, "release-name"), nil, hr.Values
	req.Namespace = cmp.Or(hr.Namespace, base.Namespace)
	if hr.KubeVersion != "" {
		req.KubeVersion = hr.KubeVersion
	}
	if len(hr.APIVersions) > 0 {
		req.APIVersions = append(slices.Clone(req.APIVersions), hr.APIVersions...)
	}
	in, err := readChart(tfs, dir, req)
	if err != nil {
		return nil, err
	}
	files, _, ch, err := in.render(ctx, req, true, nil)
	if err != nil {
		return nil, err
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if hr.IncludeCRDs {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&buf, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&buf, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		if hr.SkipHooks || hr.SkipTests && slices.Contains(h.Events, release.HookTest) {
			continue
		}
		fmt.Fprintf(&buf, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	if n := int64(buf.Len()); n > tfs.Budget().Limits().MaxBytes {
		return nil, render.NewLimitError(render.LimitBytes, n, tfs.Budget().Limits().MaxBytes, Label(dir))
	}
	return buf.Bytes(), nil
}
