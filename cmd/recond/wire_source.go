package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/source"
)

// newSource is where the manifests come from (--repo, --ref, --path), with
// the clone under --cache-dir, the render binary (checked to be of this
// build), and the chart settings.
func newSource(o *options, kube *cluster.Client, log *slog.Logger) (reconcile.Source, error) {
	cacheDir := o.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(os.TempDir(), "recond-cache")
	}
	worker, err := o.worker.Worker(context.Background(), version, log)
	if err != nil {
		return nil, err
	}
	scfg := o.source
	scfg.URL, scfg.Ref, scfg.Path, scfg.CacheDir = o.repo, o.ref, o.path, cacheDir
	scfg.Worker, scfg.Helm = worker, helmConfig(o, kube, log)
	return source.New(scfg)
}

// helmConfig is how a chart at --path is rendered: the release (--name
// unless --helm-release), recond's namespace, the API server's
// capabilities and the instance's seed (Secret recond-seed-<name>).
func helmConfig(o *options, kube *cluster.Client, log *slog.Logger) source.Helm {
	h := source.Helm{HelmOptions: o.source.Helm.HelmOptions, Namespace: o.namespace, Capabilities: kube.Capabilities, Log: log}
	if h.Release == "" {
		h.Release = o.name
	}
	seed := reconcile.SeedPrefix + o.name
	// recond diff and --dry-run write nothing: they read the seed, and a
	// chart that needs one before any run made it fails to render.
	create := !o.rec.DryRun && (o.cmd == "run" || o.cmd == "sync")
	h.Seed = func(ctx context.Context) ([]byte, error) { return kube.Seed(ctx, seed, create) }
	return h
}

// reconcilerConfig is the reconciler's config from the flags (the
// instance, --path, --health-rules); the command's build completes it.
func reconcilerConfig(o *options) (reconcile.Config, error) {
	var rules *health.Rules
	if o.healthRules != "" {
		var err error
		if rules, err = health.LoadRules(o.healthRules); err != nil {
			return reconcile.Config{}, fmt.Errorf("--health-rules: %w", err)
		}
	}
	rcfg := o.rec
	rcfg.Namespace, rcfg.Name, rcfg.Path, rcfg.HealthRules = o.namespace, o.name, o.path, rules
	return rcfg, nil
}
