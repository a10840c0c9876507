package renderer

import (
	"context"
	"errors"
	"fmt"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/oci"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
	"recond.dev/recond/reconcile/source/worker"
)

// kinds open the trees of each kind of source, by the name it gives its
// trees' fetch.Location, and classify what their reads fail with (the
// source facade's table of kinds lists the same kinds on recond's side).
var kinds = []struct {
	name      string
	open      func(loc fetch.Location, rev, dir string, lim manifest.Limits) (*fetch.Tree, error)
	reason    func(error) error
	readFault func(error) bool
}{
	{oci.Name, oci.Open, oci.WithReason, nil},
	{git.Name, git.Open, git.WithReason, git.ReadFault},
}

// Classify is what the kinds of source say of an error, for the pipe.
var Classify = worker.Classify{
	Reason: func(err error) error {
		for _, k := range kinds {
			err = k.reason(err)
		}
		return err
	},
	ReadFault: func(err error) bool {
		for _, k := range kinds {
			if k.readFault != nil && k.readFault(err) {
				return true
			}
		}
		return false
	},
}

// open opens the tree at loc with the Open of the kind that named it.
func open(loc fetch.Location, rev, dir string, lim manifest.Limits) (*fetch.Tree, error) {
	for _, k := range kinds {
		if k.name == loc.Source {
			return k.open(loc, rev, dir, lim)
		}
	}
	return nil, fmt.Errorf("no kind of source %q", loc.Source)
}

// InProcess renders in the calling process, each render in a goroutine
// that is abandoned when its context ends (package render's InGoroutine):
// for the renderers' own tests and tools. recond renders in its render
// binary (worker.Worker), which is killed instead.
type InProcess struct{}

// Render renders job.
func (InProcess) Render(ctx context.Context, job worker.Job) (*worker.Result, error) {
	return renderJob(ctx, job, false)
}

// renderJob opens job's tree and renders it under job's limits, with its
// keys; inWorker: the process is the render binary, killed at the
// render's deadline, so the render needs no goroutine of its own. No
// error it returns quotes a secret value (render.Secrets).
func renderJob(ctx context.Context, job worker.Job, inWorker bool) (*worker.Result, error) {
	b := render.NewBudget(job.Limits)
	var keysErr error
	if job.KeysErr != "" {
		keysErr = errors.New(job.KeysErr)
	}
	b.SetKeys(job.Keys, job.KeysFile, keysErr)
	t, err := open(job.Tree, job.Rev, job.Dir, job.Limits)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var req helm.Request
	if job.Helm != nil {
		req.Request = *job.Helm
	}
	res, err := renderTree(ctx, t, job, b, req, inWorker)
	if err != nil {
		return nil, b.Safe(err)
	}
	res.Sensitive = b.SecretValues()
	return res, nil
}

// renderTree renders the revision's chart, kustomization or plain files.
func renderTree(ctx context.Context, t *fetch.Tree, job worker.Job, b *render.Budget, req helm.Request, inWorker bool) (*worker.Result, error) {
	switch {
	case job.Chart:
		return chart(ctx, t, job, b, req, inWorker)
	case isKustomization(t.Dir):
		var out []byte
		var err error
		if inWorker {
			out, err = kustomize.Build(ctx, t.Root, job.Dir, b, req)
		} else {
			out, err = kustomize.InProcess(ctx, t.Root, job.Dir, b, req)
		}
		if err != nil {
			return nil, err
		}
		ms, err := b.Decode(kustomize.Label(job.Dir), out)
		if err != nil {
			return nil, err
		}
		return &worker.Result{Manifests: ms}, nil
	}
	ms, err := render.Plain(ctx, t.Root, t.Dir, job.Dir, b)
	if err != nil {
		return nil, err
	}
	return &worker.Result{Manifests: ms}, nil
}

// isKustomization tells a directory kustomize builds.
func isKustomization(d tree.Dir) bool {
	for _, name := range kustomize.Files {
		if e, err := d.Entry(name); err == nil && (e.Kind == tree.KindFile || e.Kind == tree.KindSymlink) {
			return true
		}
	}
	return false
}

// chart renders the chart at job.Dir and decodes each template's output
// under the template's name.
func chart(ctx context.Context, t *fetch.Tree, job worker.Job, b *render.Budget, req helm.Request, inWorker bool) (*worker.Result, error) {
	build := func() ([]byte, error) { return helm.Build(ctx, t.Root, job.Dir, b, req) }
	var out []byte
	var err error
	if inWorker {
		out, err = build()
	} else {
		out, err = render.InGoroutine(ctx, build)
	}
	if err != nil {
		return nil, err
	}
	docs, ch, crds, hooks := helm.SplitOutput(out)
	res := &worker.Result{Chart: &ch, CRDs: crds, Hooks: hooks}
	for _, d := range docs {
		m, err := b.Decode(d.Source, d.Content)
		if err != nil {
			return nil, err
		}
		for i := range m {
			d.Meta.Apply(&m[i])
		}
		res.Manifests = append(res.Manifests, m...)
	}
	return res, nil
}
