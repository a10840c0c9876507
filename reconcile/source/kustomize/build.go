package kustomize

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/sealed"

	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
)

// kustomizeMu serialises kustomize runs: kustomize keeps global state (its
// OpenAPI schema).
var kustomizeMu sync.Mutex

// Label names a kustomization's build in errors: "kustomize build <dir>".
func Label(dir string) string { return "kustomize build " + dir }

// InProcess runs Build in a goroutine of its own so that
// it returns as soon as ctx is done; the file system then fails its next
// read, which stops kustomize, but a build that computes without reading
// goes on (and holds kustomizeMu) until it ends: the worker process is the
// way to stop one.
func InProcess(ctx context.Context, root tree.Dir, dir string, b *render.Budget, req helm.Request) ([]byte, error) {
	return render.InGoroutine(ctx, func() ([]byte, error) {
		kustomizeMu.Lock()
		defer kustomizeMu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Once ctx is done, the file system fails its next read.
		return Build(ctx, root, dir, b, req)
	})
}

// Build builds the kustomization at dir with the sealed kustomize
// (no network, no processes, no plugins but the builtin ones) reading
// lazily from the commit's tree through a read-only, bounded file system,
// and returns its YAML output, bounded by MaxObjects and MaxBytes. Every
// error is a *ManifestError, or ctx's.
func Build(ctx context.Context, root tree.Dir, dir string, b *render.Budget, req helm.Request) (out []byte, err error) {
	label := Label(dir)
	defer func() { err = b.Safe(err) }() // last: no error quotes a secret value (secrets.go)
	defer func() {
		// A panic in kustomize (some malformed kustomizations reach one)
		// must not end the process: fail the render.
		if p := recover(); p != nil {
			out, err = nil, render.Fault(fmt.Errorf("kustomize failed: %v", p), label)
		}
	}()
	tfs := render.NewFS(ctx, root, b)
	if err := checkKustomizations(tfs, dir); err != nil {
		return nil, render.Fault(err, label)
	}
	// A kustomization's helmCharts are rendered by recond's chart renderer,
	// from the repository, sealed as a chart at --path is (package helm). Set
	// here, under kustomizeMu (or alone in a worker process).
	var noSeed error
	sealed.HelmTemplate = func(hr sealed.HelmRequest) ([]byte, error) {
		out, err := helm.KustomizeChart(ctx, tfs, req, hr)
		if errors.Is(err, helm.ErrNoSeed) {
			noSeed = err
		}
		return out, err
	}
	defer func() { sealed.HelmTemplate = nil }()
	// The default options allow builtin plugins only and restrict loads to
	// the kustomization's root; the helm "command" is never run.
	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig.HelmConfig.Enabled, opts.PluginConfig.HelmConfig.Command = true, "recond"
	resources, err := krusty.MakeKustomizer(opts).Run(tfs, render.Abs(dir))
	if noSeed != nil {
		return nil, &render.ManifestError{File: label, Err: noSeed}
	}
	if err == nil {
		if n := resources.Size(); n > b.Limits().MaxObjects {
			return nil, render.NewLimitError(render.LimitObjects, int64(n), int64(b.Limits().MaxObjects), label)
		}
		out, err = resources.AsYaml()
	}
	if err != nil {
		if fault := tfs.Err(); fault != nil {
			return nil, render.Fault(fault, label)
		}
		return nil, render.Fault(err, label)
	}
	if n := int64(len(out)); n > b.Limits().MaxBytes {
		return nil, render.NewLimitError(render.LimitBytes, n, b.Limits().MaxBytes, label)
	}
	return out, nil
}
