package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	fieldtypes "recond.dev/recond/reconcile/schema"
)

// FieldManager is the field manager recond applies with.
const FieldManager = "recond"

// Client talks to the API server on behalf of one namespace.
type Client struct {
	dyn       dynamic.Interface
	mapper    meta.ResettableRESTMapper
	types     *fieldtypes.Types
	namespace string
	// now is the clock of the discovery refreshes (time.Now).
	now func() time.Time

	mu        sync.Mutex
	lastReset time.Time // last discovery refresh for an unknown kind

	// disc is the cached discovery the mapper reads (Capabilities).
	disc discovery.CachedDiscoveryInterface
	// seed is the instance's seed once read or made (Seed).
	seedMu sync.Mutex
	seed   []byte
	// version is the server's version, asked at versionAt (Capabilities).
	versionMu sync.Mutex
	version   string
	versionAt time.Time

	// sensitive tells the objects that hold a decrypted value, whose
	// errors are concealed like a Secret's (ConcealErrorsOf).
	sensitive atomic.Pointer[Sensitive]

	// gate is asked before every write (gate.go); nil: no write is made.
	gate Gate
}

// Sensitive is what recond decrypted: which objects hold a decrypted
// value, and the text of an error with every such value removed.
type Sensitive interface {
	Holds(*unstructured.Unstructured) bool
	Redact(string) string
}

// ConcealErrorsOf makes Apply conceal the API server's message, as it does
// for a Secret, for every object that s says holds a decrypted value (the
// message may quote it), and remove decrypted values from what a concealed
// error still says (a cause's field path may hold one as a key). Nil
// conceals Secrets' only.
func (c *Client) ConcealErrorsOf(s Sensitive) {
	if s == nil {
		c.sensitive.Store(nil)
		return
	}
	c.sensitive.Store(&s)
}

// RediscoverAfter is the least time between two discovery refreshes made
// because a kind was not known: a kind whose CRD is installed later is seen
// within it, and a commit naming a kind that never comes costs at most one
// refresh per RediscoverAfter, however many ticks and objects ask.
const RediscoverAfter = 2 * time.Second

// New builds a Client for namespace from cfg. cfg may carry a wrapped
// transport (for tracing); New does not change it.
func New(cfg *rest.Config, namespace string) (*Client, error) {
	if namespace == "" {
		return nil, fmt.Errorf("no namespace given")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "recond"
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	return NewForHTTP(cfg, httpClient, namespace)
}

// NewForHTTP is New with a caller-supplied HTTP client.
func NewForHTTP(cfg *rest.Config, httpClient *http.Client, namespace string) (*Client, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	// The deferred mapper caches discovery, so a known kind costs no API
	// call. It resets the cache itself only until the cache was filled
	// once; Mapping refreshes it for an unknown kind (a CRD installed
	// since), at most once per RediscoverAfter.
	disc := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(disc)
	return &Client{dyn: dyn, mapper: mapper, disc: disc, types: fieldtypes.NewForDiscovery(dc), namespace: namespace, now: time.Now}, nil
}

// FieldTypes tells, from the server's OpenAPI v3 schemas, which fields are
// quantities, int-or-strings and durations (cached; see schema.Types).
func (c *Client) FieldTypes() *fieldtypes.Types { return c.types }

// Namespace is the namespace the client is bound to.
func (c *Client) Namespace() string { return c.namespace }

// Mapping resolves a kind to its resource and scope. A kind without a
// version resolves to the version the server prefers.
func (c *Client) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	var versions []string
	if gvk.Version != "" {
		versions = []string{gvk.Version}
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), versions...)
	if meta.IsNoMatchError(err) && c.rediscover() {
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), versions...)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve kind %s: %w", gvk.String(), err)
	}
	return m, nil
}

// rediscover drops the cached discovery, unless that was done less than
// RediscoverAfter ago; it reports whether it did.
func (c *Client) rediscover() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.lastReset.IsZero() && now.Sub(c.lastReset) < RediscoverAfter {
		return false
	}
	c.lastReset = now
	c.mapper.Reset()
	return true
}

func (c *Client) resource(gvk schema.GroupVersionKind) (dynamic.ResourceInterface, schema.GroupVersionKind, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return nil, gvk, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, gvk, fmt.Errorf("%s is cluster-scoped; recond manages only namespace %q", gvk.Kind, c.namespace)
	}
	return c.dyn.Resource(m.Resource).Namespace(c.namespace), m.GroupVersionKind, nil
}

// List returns the objects of kind gvk in the namespace that match selector,
// in the version gvk names (or, without one, the server's preferred one).
func (c *Client) List(ctx context.Context, gvk schema.GroupVersionKind, selector string) ([]unstructured.Unstructured, error) {
	ri, gvk, err := c.resource(gvk)
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 2000}
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for i := range l.Items {
			// LIST items carry no apiVersion/kind of their own.
			l.Items[i].SetGroupVersionKind(gvk)
		}
		out = append(out, l.Items...)
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// Get returns one object, or nil when it does not exist.
func (c *Client) Get(ctx context.Context, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	ri, _, err := c.resource(gvk)
	if err != nil {
		return nil, err
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", gvk.Kind, name, err)
	}
	return u, nil
}

// Apply server-side applies obj as FieldManager, forcing conflicts (Git
// wins). With dryRun the server validates and returns the result without
// persisting it.
func (c *Client) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	if !dryRun {
		return c.ApplyFor(ctx, Write{Purpose: PurposeApply, Object: obj}, nil)
	}
	return c.apply(ctx, obj, nil)
}

// ApplyFor is Apply (not a dry run) for w's purpose, with live the object
// as recond last saw it (nil: absent, or not known): the gate judges the
// write by both.
func (c *Client) ApplyFor(ctx context.Context, w Write, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	w.Verb, w.GVK, w.Name, w.Live = VerbApply, w.Object.GroupVersionKind(), w.Object.GetName(), live
	return c.apply(ctx, w.Object, &w)
}

// apply applies obj: with w, a write the gate admits first; without, a
// dry run.
func (c *Client) apply(ctx context.Context, obj *unstructured.Unstructured, w *Write) (_ *unstructured.Unstructured, err error) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if w != nil {
		done, err := c.admit(ctx, *w)
		if err != nil {
			return nil, err
		}
		defer func() { done(err) }()
	} else {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ri, _, err := c.resource(obj.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	out, err := ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		var sensitive Sensitive
		if f := c.sensitive.Load(); f != nil {
			sensitive = *f
		}
		if se := concealed("apply", obj, err, sensitive); se != err {
			return nil, se // never the server's message about a Secret, or an object holding a decrypted value
		}
		return nil, fmt.Errorf("apply %s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return out, nil
}

// Prune deletes live (background propagation) only as it was observed:
// its UID and resourceVersion are preconditions. An object changed since
// (relabelled for another instance, edited, re-created) is left alone and
// the server answers with a conflict (apierrors.IsConflict): look again.
// An object already gone is not an error.
func (c *Client) Prune(ctx context.Context, live *unstructured.Unstructured) (err error) {
	gvk, name := live.GroupVersionKind(), live.GetName()
	done, err := c.admit(ctx, Write{Purpose: PurposePrune, Verb: VerbDelete, GVK: gvk, Name: name, Live: live})
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ri, _, err := c.resource(gvk)
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{}}
	if uid := live.GetUID(); uid != "" {
		opts.Preconditions.UID = &uid
	}
	if rv := live.GetResourceVersion(); rv != "" {
		opts.Preconditions.ResourceVersion = &rv
	}
	if err := ri.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", gvk.Kind, name, err)
	}
	return nil
}

// DeleteForeground deletes live, its dependents first (foreground
// propagation), only while it has live's UID, to recreate it. An object
// already gone is not an error.
func (c *Client) DeleteForeground(ctx context.Context, live *unstructured.Unstructured) (err error) {
	gvk, name, uid := live.GroupVersionKind(), live.GetName(), live.GetUID()
	done, err := c.admit(ctx, Write{Purpose: PurposeRecreate, Verb: VerbDelete, GVK: gvk, Name: name, Live: live})
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ri, _, err := c.resource(gvk)
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationForeground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}}
	if err := ri.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", gvk.Kind, name, err)
	}
	return nil
}

// ApplyAs server-side applies obj as manager (not recond's own field
// manager: what it sets is never removed by recond's applies), forcing
// conflicts.
func (c *Client) ApplyAs(ctx context.Context, w Write, manager string) (_ *unstructured.Unstructured, err error) {
	obj := w.Object
	w.Verb, w.GVK, w.Name = VerbApply, obj.GroupVersionKind(), obj.GetName()
	done, err := c.admit(ctx, w)
	if err != nil {
		return nil, err
	}
	defer func() { done(err) }()
	ri, _, err := c.resource(obj.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	out, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply %s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return out, nil
}

// MergePatch applies a JSON merge patch (RFC 7386: a null removes a key)
// to the object w names, as manager.
func (c *Client) MergePatch(ctx context.Context, w Write, patch []byte, manager string) (_ *unstructured.Unstructured, err error) {
	w.Verb = VerbPatch
	gvk, name := w.GVK, w.Name
	done, err := c.admit(ctx, w)
	if err != nil {
		return nil, err
	}
	defer func() { done(err) }()
	ri, _, err := c.resource(gvk)
	if err != nil {
		return nil, err
	}
	out, err := ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: manager})
	if err != nil {
		return nil, fmt.Errorf("patch %s/%s: %w", gvk.Kind, name, err)
	}
	return out, nil
}

// Delete deletes w.Live with background propagation, for w's purpose, only
// while it has its UID: an object re-created since it was observed is left
// alone. An object already gone is not an error.
func (c *Client) Delete(ctx context.Context, w Write) (err error) {
	w.Verb, w.GVK, w.Name = VerbDelete, w.Live.GroupVersionKind(), w.Live.GetName()
	gvk, name, uid := w.GVK, w.Name, w.Live.GetUID()
	done, err := c.admit(ctx, w)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ri, _, err := c.resource(gvk)
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := ri.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", gvk.Kind, name, err)
	}
	return nil
}
