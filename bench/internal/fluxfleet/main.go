// Command fluxfleet holds many namespaces with Flux's apply engine in one
// process, as kustomize-controller holds one Kustomization per namespace,
// for the fleet benchmark (bench.TestFleet) to set its memory and API
// requests beside a fleet of recond processes.
//
//	fluxfleet --kubeconfig FILE [--interval 30s] [--concurrent 4] [--concurrent-ssa 4] NAMESPACE=DIR...
//
// Each namespace's reconcile does what kustomize-controller's does for a
// Kustomization whose source has not changed: unpack the manifests into a
// temporary directory, write a kustomization.yaml listing them (with the
// namespace as targetNamespace) when there is none, build it with kustomize,
// read the objects, normalize them, set the owner labels, and apply them
// with ssa.ResourceManager.ApplyAllStaged and kustomize-controller's apply
// options (a dry-run apply and a GET per object to find drift, a real apply
// for what drifted). As in kustomize-controller, --concurrent reconciles run
// at a time (its default, 4), each with --concurrent-ssa applies at a time
// (its default, 4), and a namespace is queued again --interval after its
// reconcile ended; the client has no rate limit (what Flux sets when the
// API server has priority and fairness, the default).
//
// Each namespace has a Kustomization object (fluxfleet creates a minimal
// CRD for them when there is none), whose status each reconcile patches
// four times, as kustomize-controller's does when nothing changed: Ready
// unknown and Reconciling when it starts, Reconciling again before the
// build and before the apply, Ready with the history entry at the end.
//
// What it leaves out: the informer caches of Kustomizations and sources,
// the artifact download from source-controller (and source-controller
// itself), the inventory's diff and pruning (nothing to prune while the
// manifests do not change), health checks and events. Its requests and its
// memory are a floor for Flux's.
//
// Each reconcile writes one JSON line to stderr: msg "reconcile", the
// namespace, the duration, the count of objects by action, or the error.
package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	// The field manager and the group of the owner labels, as
	// kustomize-controller's.
	controllerName = "kustomize-controller"
	kustomizeGroup = "kustomize.toolkit.fluxcd.io"
	// kustomizationName is each namespace's Kustomization.
	kustomizationName = "fleet"
)

// target is one namespace and the state of its Kustomization's status.
type target struct {
	namespace, dir string
	// revision is what a GitRepository's artifact would say (the digest of
	// the manifests).
	revision string
	// first is the time of the first reconcile; reconciles counts them;
	// inventory says whether the status holds the inventory yet.
	first      time.Time
	reconciles int
	inventory  bool
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	interval := flag.Duration("interval", 30*time.Second, "a namespace's reconcile is queued again this long after the last ended (also its timeout, as a Kustomization's without spec.timeout)")
	concurrent := flag.Int("concurrent", 4, "reconciles at a time (kustomize-controller's --concurrent)")
	concurrentSSA := flag.Int("concurrent-ssa", 4, "server-side applies at a time in a reconcile (kustomize-controller's --concurrent-ssa)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var targets []*target
	for _, a := range flag.Args() {
		ns, dir, ok := strings.Cut(a, "=")
		if !ok || ns == "" || dir == "" {
			log.Error("want NAMESPACE=DIR arguments", "arg", a)
			os.Exit(2)
		}
		targets = append(targets, &target{namespace: ns, dir: dir})
	}
	if len(targets) == 0 || *concurrent < 1 {
		log.Error("want NAMESPACE=DIR arguments and --concurrent of 1 or more")
		os.Exit(2)
	}
	// controller-runtime's client logs nothing here.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Error("kubeconfig", "err", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Error("client", "err", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := kustomizations(ctx, c, targets, *interval); err != nil {
		log.Error("kustomizations", "err", err)
		os.Exit(1)
	}
	queue := make(chan int, len(targets))
	for i := range targets {
		queue <- i
	}
	var workers sync.WaitGroup
	for range *concurrent {
		workers.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case i := <-queue:
					t := targets[i]
					start := time.Now()
					actions, err := reconcile(ctx, c, t, *interval, *concurrentSSA)
					attrs := []any{"namespace", t.namespace, "duration", time.Since(start).Seconds()}
					for a, n := range actions {
						attrs = append(attrs, string(a), n)
					}
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						log.Error("reconcile", append(attrs, "err", err)...)
					} else {
						log.Info("reconcile", attrs...)
					}
					time.AfterFunc(*interval, func() { queue <- i })
				}
			}
		})
	}
	workers.Wait()
}

// reconcile is one reconcile of t's namespace.
func reconcile(ctx context.Context, c client.Client, t *target, timeout time.Duration, concurrentSSA int) (actions map[ssa.Action]int, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if t.first.IsZero() {
		t.first = start
	}
	t.reconciles++
	progressing := func(what string) error {
		return t.patchStatus(ctx, c, map[string]any{"conditions": []any{
			condition("Ready", "Unknown", "Progressing", "Reconciliation in progress", start),
			condition("Reconciling", "True", "Progressing", fmt.Sprintf("%s for revision %s with a timeout of %s", what, t.revision, timeout), start),
		}})
	}
	var resources []byte
	var objects []*unstructured.Unstructured
	defer func() {
		// The status at the end, whatever happened.
		if ferr := t.finalStatus(ctx, c, start, resources, objects, err); err == nil {
			err = ferr
		}
	}()
	if err := progressing("Fetching manifests"); err != nil {
		return nil, err
	}
	if err := progressing("Building manifests"); err != nil {
		return nil, err
	}
	resources, err = build(t)
	if err != nil {
		return nil, err
	}
	objects, err = ssautil.ReadObjects(bytes.NewReader(resources))
	if err != nil {
		return nil, err
	}
	m := ssa.NewResourceManager(c, nil, ssa.Owner{Field: controllerName, Group: kustomizeGroup})
	m.SetOwnerLabels(objects, kustomizationName, t.namespace)
	m.SetConcurrency(concurrentSSA)
	if err := progressing("Detecting drift"); err != nil {
		return nil, err
	}
	if err := normalize.UnstructuredList(objects); err != nil {
		return nil, err
	}
	cs, err := m.ApplyAllStaged(ctx, objects, applyOptions())
	actions = map[ssa.Action]int{}
	if cs != nil {
		for _, e := range cs.Entries {
			actions[e.Action]++
		}
	}
	return actions, err
}

// build copies t's manifests into a temporary directory (kustomize-controller
// unpacks the source's artifact into one at every reconcile), writes a
// kustomization.yaml when there is none, and runs kustomize.
func build(t *target) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "fluxfleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return nil, err
	}
	var files []string
	haveKustomization := false
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(t.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o600); err != nil {
			return nil, err
		}
		switch ext := filepath.Ext(e.Name()); {
		case e.Name() == "kustomization.yaml" || e.Name() == "kustomization.yml" || e.Name() == "Kustomization":
			haveKustomization = true
		case ext == ".yaml" || ext == ".yml":
			files = append(files, e.Name())
		}
	}
	if !haveKustomization {
		k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n", t.namespace)
		for _, f := range files {
			k += "  - " + f + "\n"
		}
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o600); err != nil {
			return nil, err
		}
	}
	opts := krusty.MakeDefaultOptions()
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), tmp)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	for _, r := range m.Resources() {
		if r.GetName() == "" || r.GetKind() == "" || r.GetApiVersion() == "" {
			return nil, errors.New("kustomize build: an object without apiVersion, kind or name")
		}
	}
	return m.AsYaml()
}

// applyOptions are kustomize-controller's for a Kustomization without
// spec.force.
func applyOptions() ssa.ApplyOptions {
	opts := ssa.DefaultApplyOptions()
	opts.ExclusionSelector = map[string]string{kustomizeGroup + "/reconcile": "disabled", kustomizeGroup + "/ssa": "Ignore"}
	opts.IfNotPresentSelector = map[string]string{kustomizeGroup + "/ssa": "IfNotPresent"}
	opts.ForceSelector = map[string]string{kustomizeGroup + "/force": "enabled"}
	opts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations: []string{corev1.LastAppliedConfigAnnotation, kustomizeGroup + "/checksum", "fluxcd.io/sync-checksum"},
		Labels:      []string{"fluxcd.io/sync-gc-mark"},
		FieldManagers: []ssa.FieldManager{
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: controllerName, OperationType: metav1.ManagedFieldsOperationUpdate},
		},
		Exclusions: map[string]string{kustomizeGroup + "/ssa": "Merge"},
	}
	return opts
}

var (
	gvkCRD           = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	gvkKustomization = schema.GroupVersionKind{Group: kustomizeGroup, Version: "v1", Kind: "Kustomization"}
)

// kustomizations makes sure of the Kustomization CRD (a minimal one, with
// the status subresource) and creates each target's Kustomization.
func kustomizations(ctx context.Context, c client.Client, targets []*target, interval time.Duration) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "kustomizations." + kustomizeGroup},
		"spec": map[string]any{
			"group": kustomizeGroup,
			"names": map[string]any{"kind": "Kustomization", "listKind": "KustomizationList", "plural": "kustomizations", "singular": "kustomization", "shortNames": []any{"ks"}},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	crd.SetGroupVersionKind(gvkCRD)
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the Kustomization CRD: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvkCRD)
		if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if established {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the Kustomization CRD is not established after 1m")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, t := range targets {
		sum, err := dirDigest(t.dir)
		if err != nil {
			return err
		}
		t.revision = "main@sha1:" + sum
		k := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": kustomizationName, "namespace": t.namespace},
			"spec": map[string]any{
				"interval": interval.String(), "path": "./", "prune": true, "targetNamespace": t.namespace,
				"sourceRef": map[string]any{"kind": "GitRepository", "name": kustomizationName},
			},
		}}
		k.SetGroupVersionKind(gvkKustomization)
		// The REST mapper may not know the new kind at once.
		for deadline := time.Now().Add(time.Minute); ; {
			err := c.Create(ctx, k)
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("create the Kustomization of %s: %w", t.namespace, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

// dirDigest is a SHA-1 of dir's files (names and contents), in hex.
func dirDigest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha1.New()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func condition(typ, status, reason, message string, since time.Time) map[string]any {
	return map[string]any{
		"type": typ, "status": status, "reason": reason, "message": message,
		"observedGeneration": 1, "lastTransitionTime": since.UTC().Format(time.RFC3339),
	}
}

// patchStatus merge-patches the status of t's Kustomization with status.
func (t *target) patchStatus(ctx context.Context, c client.Client, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	k := &unstructured.Unstructured{}
	k.SetGroupVersionKind(gvkKustomization)
	k.SetNamespace(t.namespace)
	k.SetName(kustomizationName)
	if err := c.Status().Patch(ctx, k, client.RawPatch(types.MergePatchType, body), client.FieldOwner("gotk-kustomize-controller")); err != nil {
		return fmt.Errorf("patch the status of %s/%s: %w", t.namespace, kustomizationName, err)
	}
	return nil
}

// finalStatus is the reconcile's last status patch: Ready (true, or false
// with the error), the Reconciling condition removed, the history entry
// and, the first time, the inventory.
func (t *target) finalStatus(ctx context.Context, c client.Client, start time.Time, resources []byte, objects []*unstructured.Unstructured, rerr error) error {
	ready := condition("Ready", "True", "ReconciliationSucceeded", "Applied revision: "+t.revision, time.Now())
	result := "ReconciliationSucceeded"
	if rerr != nil {
		result = "ReconciliationFailed"
		ready = condition("Ready", "False", result, rerr.Error(), time.Now())
	}
	status := map[string]any{
		"conditions":            []any{ready},
		"observedGeneration":    1,
		"lastAttemptedRevision": t.revision,
	}
	if rerr == nil {
		status["lastAppliedRevision"] = t.revision
	}
	if resources != nil {
		sum := sha256.Sum256(resources)
		status["history"] = []any{map[string]any{
			"digest":                 "sha256:" + hex.EncodeToString(sum[:]),
			"firstReconciled":        t.first.UTC().Format(time.RFC3339),
			"lastReconciled":         time.Now().UTC().Format(time.RFC3339),
			"lastReconciledDuration": time.Since(start).String(),
			"lastReconciledStatus":   result,
			"totalReconciliations":   t.reconciles,
			"metadata":               map[string]any{"revision": t.revision},
		}}
	}
	if rerr == nil && !t.inventory && len(objects) > 0 {
		var entries []any
		for _, o := range objects {
			gvk := o.GroupVersionKind()
			entries = append(entries, map[string]any{
				"id": fmt.Sprintf("%s_%s_%s_%s", o.GetNamespace(), o.GetName(), gvk.Group, gvk.Kind),
				"v":  gvk.Version,
			})
		}
		status["inventory"] = map[string]any{"entries": entries}
		t.inventory = true
	}
	return t.patchStatus(context.WithoutCancel(ctx), c, status)
}
