package schema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile/diff"
)

// Defaults for Types' timing.
const (
	// DefaultRecheck is how old the cached list of documents may grow
	// before Prepare reads it again (and fetches documents whose hash
	// changed).
	DefaultRecheck = 10 * time.Minute
	// DefaultRetry is how long a kind the server publishes no schema for
	// is not looked for again.
	DefaultRetry = time.Minute
)

// Types implements diff.FieldTypes from the server's OpenAPI v3 documents.
// It is safe for concurrent use.
type Types struct {
	client openapi.ClientWithContext
	// Recheck and Retry override DefaultRecheck and DefaultRetry when
	// non-zero; now is the clock (time.Now).
	Recheck, Retry time.Duration
	now            func() time.Time

	mu sync.RWMutex
	// docs holds the kinds of each group-version's document fetched,
	// compacted (the parsed document is not kept), urls the URL (with
	// hash) it came from.
	docs map[schema.GroupVersion]*compacted
	urls map[schema.GroupVersion]string
	// kinds maps each kind of the fetched documents to its fields.
	kinds map[schema.GroupVersionKind]kindSchema
	// missing holds kinds looked for and not found, with when.
	missing map[schema.GroupVersionKind]time.Time
	// checked is when the list of documents was last read; zero after
	// Invalidate.
	checked time.Time
}

type kindSchema struct {
	doc  *compacted
	root *field
}

// compacted is what is kept of a group-version's document: its kinds'
// fields.
type compacted struct {
	kinds map[schema.GroupVersionKind]*field
}

// New builds Types that read the documents of the API server cfg names.
func New(cfg *rest.Config) (*Types, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return NewForDiscovery(dc), nil
}

// NewForDiscovery builds Types that read documents through d's OpenAPIV3
// client. With a caching discovery client, invalidating its cache and then
// Types' (Invalidate) refreshes both.
func NewForDiscovery(d discovery.DiscoveryInterface) *Types {
	return newTypes(openapi.ToClientWithContext(d.OpenAPIV3()))
}

func newTypes(c openapi.ClientWithContext) *Types {
	return &Types{
		client: c, now: time.Now,
		docs: map[schema.GroupVersion]*compacted{}, urls: map[schema.GroupVersion]string{},
		kinds: map[schema.GroupVersionKind]kindSchema{}, missing: map[schema.GroupVersionKind]time.Time{},
	}
}

// TypeOf implements diff.FieldTypes: the type of the field at path in kind
// gvk, diff.FieldUnknown when no document fetched so far describes it. It
// does no I/O; Prepare fetches.
func (t *Types) TypeOf(gvk schema.GroupVersionKind, path []string) diff.FieldType {
	t.mu.RLock()
	k, ok := t.kinds[gvk]
	t.mu.RUnlock()
	if !ok {
		return diff.FieldUnknown
	}
	return k.root.typeOf(path)
}

// Known reports whether a fetched document describes kind gvk.
func (t *Types) Known(gvk schema.GroupVersionKind) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.kinds[gvk]
	return ok
}

// Invalidate makes the next Prepare read the list of documents again and
// fetch those that changed, as after the discovery cache is refreshed.
func (t *Types) Invalidate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checked = time.Time{}
	clear(t.missing)
}

// Prepare makes sure the documents describing gvks are cached. It costs no
// API call when every kind is known and the cache is younger than Recheck;
// else it reads the list of documents (one call) and fetches each
// group-version document that is needed and new or changed (one call each).
// A kind the server publishes no schema for is looked for again only after
// Retry. On error, what was cached stays and TypeOf answers from it.
func (t *Types) Prepare(ctx context.Context, gvks []schema.GroupVersionKind) error {
	now := t.now()
	t.mu.RLock()
	stale := t.checked.IsZero() || now.Sub(t.checked) >= or(t.Recheck, DefaultRecheck)
	need := map[schema.GroupVersion]bool{}
	for _, gvk := range gvks {
		if _, ok := t.kinds[gvk]; ok {
			continue
		}
		if at, ok := t.missing[gvk]; ok && now.Sub(at) < or(t.Retry, DefaultRetry) {
			continue
		}
		need[gvk.GroupVersion()] = true
	}
	if stale && len(t.kinds) > 0 {
		for gv := range t.docs {
			need[gv] = true // refetched only if its hash changed
		}
	}
	t.mu.RUnlock()
	if len(need) == 0 {
		return nil
	}

	paths, err := t.client.PathsWithContext(ctx)
	if err != nil {
		return fmt.Errorf("list openapi v3 documents: %w", err)
	}
	t.mu.Lock()
	t.checked = now
	t.mu.Unlock()
	var errs []error
	for gv := range need {
		if err := t.fetch(ctx, gv, paths[docPath(gv)]); err != nil {
			errs = append(errs, err)
		}
	}
	t.mu.Lock()
	for _, gvk := range gvks {
		if _, ok := t.kinds[gvk]; !ok {
			t.missing[gvk] = now
		}
	}
	t.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("openapi v3 documents: %w", errors.Join(errs...))
	}
	return nil
}

// fetch (re)loads gv's document from gvDoc unless the cached one came from
// the same URL. A group-version the server no longer lists is dropped.
func (t *Types) fetch(ctx context.Context, gv schema.GroupVersion, gvDoc openapi.GroupVersionWithContext) error {
	if gvDoc == nil {
		t.store(gv, "", nil)
		return nil
	}
	url := gvDoc.ServerRelativeURL()
	t.mu.RLock()
	same := t.urls[gv] == url && t.docs[gv] != nil
	t.mu.RUnlock()
	if same {
		return nil
	}
	b, err := gvDoc.SchemaWithContext(ctx, "application/json")
	if err != nil {
		return fmt.Errorf("fetch %s: %w", docPath(gv), err)
	}
	doc, err := parse(b)
	if err != nil {
		return fmt.Errorf("parse %s: %w", docPath(gv), err)
	}
	t.store(gv, url, &compacted{kinds: compact(doc)})
	return nil
}

// store replaces gv's document and the kinds it describes.
func (t *Types) store(gv schema.GroupVersion, url string, doc *compacted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for gvk, k := range t.kinds {
		if gvk.GroupVersion() == gv && k.doc == t.docs[gv] {
			delete(t.kinds, gvk)
		}
	}
	if doc == nil {
		delete(t.docs, gv)
		delete(t.urls, gv)
		return
	}
	t.docs[gv], t.urls[gv] = doc, url
	for gvk, root := range doc.kinds {
		if gvk.GroupVersion() == gv {
			t.kinds[gvk] = kindSchema{doc: doc, root: root}
			delete(t.missing, gvk)
		}
	}
}

// docPath is the key of gv's document in the server's list: "api/v1" for
// the core group, "apis/apps/v1" for the others.
func docPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

var _ diff.FieldTypes = (*Types)(nil)
