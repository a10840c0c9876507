package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/sealed"
)

// Manifest is one Kubernetes object read from the repository.
type Manifest struct {
	// File is the path of the file inside the repository, or
	// "kustomize build <path>" for objects produced by kustomize.
	File string
	// Object is the object exactly as written (no namespace is added).
	Object *unstructured.Unstructured
	// Hook marks a chart's hook (annotation helm.sh/hook) with a
	// pre-install, pre-upgrade, post-install or post-upgrade event: it is
	// run around the revision's other objects, not held like them.
	Hook bool
	// Generated are the fields of a chart's object (paths of keys; one
	// empty path: the whole object) that a key or certificate maker
	// (genCA, genPrivateKey, genSelfSignedCert, genSignedCert, ...) or a
	// random salt (bcrypt, htpasswd, encryptAES) made: their render cannot
	// be repeated, so they are written when the object is created and the
	// live values are kept after that.
	Generated [][]string
}

// ManifestError reports a manifest that cannot be read or is not a valid
// object. Render wraps it; use errors.As to get at it.
type ManifestError struct {
	// File is as in Manifest.File.
	File string
	// Object is "Kind/name", or as much of it as is known, or "".
	Object string
	Err    error
}

func (e *ManifestError) Error() string {
	if e.Object == "" {
		return e.File + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Object + ": " + e.Err.Error()
}

func (e *ManifestError) Unwrap() error { return e.Err }

// Render reads the manifests under Config.Path at commit sha (a full SHA,
// normally from Fetch). For a remote repository the commit must be in the
// cache, i.e. Fetch must have returned it.
//
// Render checks that each object has apiVersion, kind and metadata.name,
// that its numbers are exact and that the render stays within
// Config.Limits; namespaces, duplicates and scope are the caller's concern.
// It never opens a network connection or starts a process, and returns
// soon after ctx is done.
func (s *Source) Render(ctx context.Context, sha string) ([]Manifest, error) {
	if !s.isRevision(sha) {
		what := "a full commit SHA"
		if s.kind == kindOCI {
			what = "a sha256: manifest digest"
		}
		return nil, fmt.Errorf("render %s: %q is not %s", s.display, sha, what)
	}
	sha = strings.ToLower(sha)
	if s.kind != kindLocal {
		mu := cacheLock(s.cache)
		mu.RLock()
		defer mu.RUnlock()
	}
	ms, err := s.render(ctx, sha)
	if err != nil {
		s.renderFailed(sha, err)
		return nil, fmt.Errorf("render %s at %s: %w", s.display, shortRev(sha), withReason(err))
	}
	return ms, nil
}

func (s *Source) render(ctx context.Context, sha string) ([]Manifest, error) {
	repo, root, dir, err := s.tree(sha)
	if err != nil {
		return nil, err
	}
	b := &budget{lim: s.cfg.Limits.withDefaults()}
	b.dec.readKeys(s.cfg.SOPSAgeKeysFile)
	ms, err := s.renderWith(ctx, repo, sha, root, dir, b)
	if err != nil {
		return nil, b.safe(err) // no error quotes a secret value (secrets.go)
	}
	at := sensitiveAt{sha: sha, values: b.dec.secretValues()}
	if s.cfg.SOPSAgeKeysFile != "" {
		fp := b.dec.fingerprint()
		at.keys = &fp
	}
	s.mu.Lock()
	s.keepSensitive(at)
	s.mu.Unlock()
	return ms, nil
}

// renderWith renders the revision's chart, kustomization or plain files.
func (s *Source) renderWith(ctx context.Context, repo *git.Repository, sha string, root, dir Dir, b *budget) ([]Manifest, error) {
	if e, err := dir.Entry(chartFile); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
		return s.helm(ctx, repo, sha, root, b)
	}
	for _, name := range kustomizationFiles {
		if e, err := dir.Entry(name); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
			return s.kustomize(ctx, repo, sha, root, b)
		}
	}
	return readDir(ctx, root, dir, s.dir, b)
}

// tree opens the repository and returns the commit's files: the root and
// the configured directory.
func (s *Source) tree(sha string) (*git.Repository, Dir, Dir, error) {
	if s.kind == kindOCI {
		root, dir, _, err := s.ociTree(sha)
		return nil, root, dir, err
	}
	repo, err := s.open()
	if err != nil {
		return nil, nil, nil, err
	}
	commit, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	var dir *object.Tree = root
	if s.dir != "." {
		if dir, err = root.Tree(s.dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return nil, nil, nil, &ManifestError{File: s.dir, Err: err}
			}
			return nil, nil, nil, fmt.Errorf("%s: %w", s.dir, err)
		}
	}
	return repo, gitDir{root}, gitDir{dir}, nil
}

// readDir decodes every manifest file below dir (whose path in the
// repository is base) in lexical path order. Hidden files and directories
// (".github/...") are skipped. A symbolic link is followed when it leads
// to a file inside the repository (its content is read under the link's
// name); one that dangles, leads outside or leads to a directory fails the
// render, as does a file that cannot be read. Only the tree is walked up
// front: each blob is looked up when its turn comes, and read only once its
// size has passed the limits.
func readDir(ctx context.Context, root, dir Dir, base string, b *budget) ([]Manifest, error) {
	type entry struct {
		name   string // below dir
		kind   EntryKind
		parent Dir
	}
	var files []entry
	var walk func(d Dir, at string) error
	walk = func(d Dir, at string) error {
		for _, e := range d.Entries() {
			name := path.Join(at, e.Name)
			switch {
			case e.Kind == KindDir:
				sub, err := d.Dir(e.Name)
				if err != nil {
					return &ManifestError{File: path.Join(base, name), Err: err}
				}
				if err := walk(sub, name); err != nil {
					return err
				}
			case e.Kind == KindOther || hidden(name):
			case e.Kind == KindSymlink || isManifest(name):
				files = append(files, entry{name, e.Kind, d})
			}
		}
		return nil
	}
	if err := walk(dir, ""); err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	r := &resolver{root: root}
	var out []Manifest
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := path.Join(base, f.name)
		var blob File
		if f.kind == KindSymlink {
			n, err := r.resolve(name)
			if err != nil {
				return nil, &ManifestError{File: name, Err: err}
			}
			if n.file == nil {
				return nil, &ManifestError{File: name, Err: fmt.Errorf("symlink to directory %s: not followed; list its files or link them one by one", n.path)}
			}
			if !isManifest(f.name) {
				continue
			}
			blob = n.file
		} else {
			bl, err := f.parent.File(path.Base(f.name))
			if err != nil {
				return nil, &ManifestError{File: name, Err: fmt.Errorf("read: %w", err)}
			}
			blob = bl
		}
		content, err := b.readFile(name, blob)
		if err != nil {
			return nil, err
		}
		b.dec.setRole(name, roleManifest)
		if content, err = b.decrypt(name, content); err != nil {
			return nil, err
		}
		ms, err := b.decode(name, content)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

func isManifest(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func hidden(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// decode splits a YAML (multi-document) or JSON file into objects,
// skipping empty documents and expanding lists. The file is inspected
// first (alias expansion, depth, exact numbers), so that the decoder never
// expands a bomb or rounds a number.
func (b *budget) decode(file string, data []byte) ([]Manifest, error) {
	if err := b.inspect(file, data, true); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Manifest
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, &ManifestError{File: file, Err: b.secrets.parseError(file, data, doc, true, err)}
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" { // empty or only comments
			continue
		}
		// util/json keeps integers as int64, as Unstructured expects.
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			return nil, &ManifestError{File: file, Err: fmt.Errorf("document %d: not an object: %w", doc, err)}
		}
		var err error
		if out, err = b.appendObject(out, file, doc, obj); err != nil {
			return nil, err
		}
	}
}

// appendObject validates obj and appends it, or its items when it is a
// list (kind "List", or any "...List" kind with items, as kubectl does).
func (b *budget) appendObject(out []Manifest, file string, doc int, obj map[string]any) ([]Manifest, error) {
	u := &unstructured.Unstructured{Object: obj}
	kind, name := u.GetKind(), u.GetName()
	if items, ok := obj["items"]; kind == "List" || (ok && strings.HasSuffix(kind, "List")) {
		list, ok := items.([]any)
		if !ok && items != nil {
			return nil, &ManifestError{File: file, Object: kind, Err: fmt.Errorf("document %d: items is not a list", doc)}
		}
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, &ManifestError{File: file, Object: kind, Err: fmt.Errorf("document %d: item %d is not an object", doc, i)}
			}
			var err error
			if out, err = b.appendObject(out, file, doc, m); err != nil {
				return nil, err
			}
		}
		return out, nil
	}

	var missing []string
	if u.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if kind == "" {
		missing = append(missing, "kind")
	}
	if name == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return nil, &ManifestError{File: file, Object: ref(kind, name), Err: fmt.Errorf("document %d: missing %s", doc, strings.Join(missing, ", "))}
	}
	if d := jsonDepth(obj); d > int64(b.lim.MaxDepth) {
		err := newLimitError(LimitDepth, d, int64(b.lim.MaxDepth), file)
		err.Object = ref(kind, name)
		return nil, err
	}
	if b.objects++; b.objects > b.lim.MaxObjects {
		return nil, newLimitError(LimitObjects, int64(b.objects), int64(b.lim.MaxObjects), file)
	}
	return append(out, Manifest{File: file, Object: u}), nil
}

// helm renders the chart at s.dir, in a worker process when one is
// configured (killed when ctx is done), and decodes each template's
// output under the template's name.
func (s *Source) helm(ctx context.Context, repo *git.Repository, sha string, root Dir, b *budget) ([]Manifest, error) {
	req, err := s.helmRequest(ctx, repo, sha)
	if err != nil {
		return nil, err
	}
	read := b.read.Load()
	out, err := s.withSeed(ctx, &req, func() ([]byte, error) {
		if s.cfg.Worker != nil {
			return s.renderInWorker(ctx, sha, b, helmLabel(s.dir), &req, true)
		}
		b.read.Store(read) // a render again with the seed reads the same files: count them once
		return inGoroutine(ctx, func() ([]byte, error) { return helmBuild(ctx, root, s.dir, b, req) })
	})
	if err != nil {
		return nil, err
	}
	docs, chart, crds, hooks := splitHelmOutput(out)
	chart.Values = slices.Clone(s.cfg.Helm.Values)
	s.mu.Lock()
	s.chart = chartAt{sha: sha, chart: &chart}
	s.mu.Unlock()
	if log := s.cfg.Helm.Log; log != nil && len(crds)+len(hooks) > 0 {
		log.InfoContext(ctx, "chart render left out what a namespaced instance does not apply (see docs/helm.md): CRDs, and test, rollback and delete hooks",
			"revision", shortRev(sha), "crds", crds, "hooks", hooks)
	}
	var ms []Manifest
	for _, d := range docs {
		m, err := b.decode(d.Source, d.Content)
		if err != nil {
			return nil, err
		}
		for i := range m {
			d.Meta.apply(&m[i])
		}
		ms = append(ms, m...)
	}
	return ms, nil
}

// chartAt is the chart of the last revision rendered as one.
type chartAt struct {
	sha   string
	chart *Chart
}

// Chart is the chart revision sha rendered as, when it was the last
// revision rendered and a chart; nil otherwise.
func (s *Source) Chart(sha string) *Chart {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chart.sha != sha {
		return nil
	}
	return s.chart.chart
}

// helmRequest gathers what a chart's render needs from outside the chart:
// the release, the values files, the cluster's capabilities and the
// commit's time (the seed is asked for when a render needs it: withSeed).
func (s *Source) helmRequest(ctx context.Context, repo *git.Repository, sha string) (helmRequest, error) {
	h := s.cfg.Helm
	req := helmRequest{Release: h.Release, Namespace: h.Namespace, Values: h.Values}
	if req.Release == "" {
		req.Release = "release-name"
	}
	if repo != nil { // nil: a tree without a commit (tests)
		c, err := repo.CommitObject(plumbing.NewHash(sha))
		if err != nil {
			return req, fmt.Errorf("commit %s: %w", sha, err)
		}
		req.Now = c.Committer.When.UTC()
	}
	if s.kind == kindOCI {
		// An artifact's time is when it was made, as its manifest says.
		a, err := s.cachedArtifact(sha)
		if err != nil {
			return req, err
		}
		req.Now = a.Created
	}
	var err error
	if h.Capabilities != nil {
		if req.KubeVersion, req.APIVersions, err = h.Capabilities(ctx); err != nil {
			return req, &capabilitiesError{err}
		}
	}
	return req, nil
}

// capabilitiesError is the API server not telling its capabilities.
type capabilitiesError struct{ err error }

func (e *capabilitiesError) Error() string {
	return "the API server's capabilities, for the chart: " + e.err.Error()
}
func (e *capabilitiesError) Unwrap() error { return e.err }

// inGoroutine runs build in a goroutine of its own and returns as soon as
// ctx is done; the build then goes on until it ends (a worker process is
// the way to stop one).
func inGoroutine(ctx context.Context, build func() ([]byte, error)) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := build()
		done <- result{out, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-done:
		return res.out, res.err
	}
}

// kustomizeMu serialises kustomize runs: kustomize keeps global state (its
// OpenAPI schema).
var kustomizeMu sync.Mutex

// kustomize builds the kustomization at s.dir and decodes what it produced.
// With a Worker configured, the build runs in a worker process (see
// worker.go) that is killed when ctx is done; otherwise it runs in-process.
func (s *Source) kustomize(ctx context.Context, repo *git.Repository, sha string, root Dir, b *budget) ([]Manifest, error) {
	label := kustomizeLabel(s.dir)
	req, err := s.helmRequest(ctx, repo, sha)
	var capsErr *capabilitiesError
	if errors.As(err, &capsErr) {
		// Only a helmCharts entry needs them: it fails with this error.
		req.CapsErr, err = err.Error(), nil
	}
	if err != nil {
		return nil, err
	}
	read := b.read.Load()
	out, err := s.withSeed(ctx, &req, func() ([]byte, error) {
		if s.cfg.Worker != nil {
			return s.renderInWorker(ctx, sha, b, label, &req, false)
		}
		b.read.Store(read) // a render again with the seed reads the same files: count them once
		return kustomizeInProcess(ctx, root, s.dir, b, req)
	})
	if err != nil {
		return nil, err
	}
	return b.decode(label, out)
}

// withSeed runs render, and once more with the instance's seed when a
// chart's random function asked for it: the seed Secret is read (or made)
// only for charts that use one.
func (s *Source) withSeed(ctx context.Context, req *helmRequest, render func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	req.Seed = s.seed // known once a render needed it
	s.mu.Unlock()
	out, err := render()
	if !errors.Is(err, ErrNoSeed) || s.cfg.Helm.Seed == nil || len(req.Seed) > 0 {
		return out, err
	}
	if req.Seed, err = s.cfg.Helm.Seed(ctx); err != nil {
		return nil, fmt.Errorf("the instance's seed, for the chart: %w", err)
	}
	s.mu.Lock()
	s.seed = req.Seed
	s.mu.Unlock()
	return render()
}

func kustomizeLabel(dir string) string { return "kustomize build " + dir }

// kustomizeInProcess runs kustomizeBuild in a goroutine of its own so that
// it returns as soon as ctx is done; the file system then fails its next
// read, which stops kustomize, but a build that computes without reading
// goes on (and holds kustomizeMu) until it ends: the worker process is the
// way to stop one.
func kustomizeInProcess(ctx context.Context, root Dir, dir string, b *budget, req helmRequest) ([]byte, error) {
	return inGoroutine(ctx, func() ([]byte, error) {
		kustomizeMu.Lock()
		defer kustomizeMu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Once ctx is done, the file system fails its next read.
		return kustomizeBuild(ctx, root, dir, b, req)
	})
}

// kustomizeBuild builds the kustomization at dir with the sealed kustomize
// (no network, no processes, no plugins but the builtin ones) reading
// lazily from the commit's tree through a read-only, bounded file system,
// and returns its YAML output, bounded by MaxObjects and MaxBytes. Every
// error is a *ManifestError, or ctx's.
func kustomizeBuild(ctx context.Context, root Dir, dir string, b *budget, req helmRequest) (out []byte, err error) {
	label := kustomizeLabel(dir)
	defer func() { err = b.safe(err) }() // last: no error quotes a secret value (secrets.go)
	defer func() {
		// A panic in kustomize (some malformed kustomizations reach one)
		// must not end the process: fail the render.
		if p := recover(); p != nil {
			out, err = nil, renderFault(fmt.Errorf("kustomize failed: %v", p), label)
		}
	}()
	tfs := newTreeFS(ctx, root, b)
	if err := checkKustomizations(tfs, dir); err != nil {
		return nil, renderFault(err, label)
	}
	// A kustomization's helmCharts are rendered by recond's chart renderer,
	// from the repository, sealed as a chart at --path is (helm.go). Set
	// here, under kustomizeMu (or alone in a worker process).
	var noSeed error
	sealed.HelmTemplate = func(hr sealed.HelmRequest) ([]byte, error) {
		out, err := kustomizeChart(ctx, tfs, req, hr)
		if errors.Is(err, ErrNoSeed) {
			noSeed = err
		}
		return out, err
	}
	defer func() { sealed.HelmTemplate = nil }()
	// The default options allow builtin plugins only and restrict loads to
	// the kustomization's root; the helm "command" is never run.
	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig.HelmConfig.Enabled, opts.PluginConfig.HelmConfig.Command = true, "recond"
	resources, err := krusty.MakeKustomizer(opts).Run(tfs, abs(dir))
	if noSeed != nil {
		return nil, &ManifestError{File: label, Err: noSeed}
	}
	if err == nil {
		if n := resources.Size(); n > b.lim.MaxObjects {
			return nil, newLimitError(LimitObjects, int64(n), int64(b.lim.MaxObjects), label)
		}
		out, err = resources.AsYaml()
	}
	if err != nil {
		if fault := tfs.Err(); fault != nil {
			return nil, renderFault(fault, label)
		}
		return nil, renderFault(err, label)
	}
	if n := int64(len(out)); n > b.lim.MaxBytes {
		return nil, newLimitError(LimitBytes, n, b.lim.MaxBytes, label)
	}
	return out, nil
}

// renderFault returns err as a *ManifestError (of label when it is not one
// already), except for cancellation, which is returned as it is.
func renderFault(err error, label string) error {
	var (
		me *ManifestError
		se *Error
		de *DecryptError
	)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &se) && errors.As(err, &de):
		return se // no key opens a SOPS file: reason auth, not the manifest's
	case errors.As(err, &me):
		return me
	}
	return &ManifestError{File: label, Err: err}
}
