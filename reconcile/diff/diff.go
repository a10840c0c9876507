package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Action is what applying the desired state does to one object.
type Action string

// The actions a Change can carry.
const (
	Create    Action = "create"
	Update    Action = "update"
	Delete    Action = "delete"
	Unchanged Action = "unchanged"
)

// FieldDiff is one field whose live value differs from the desired one.
type FieldDiff struct {
	// Path names the field, e.g. "spec.replicas", "metadata.labels.app",
	// "spec.template.spec.containers[name=web].image" or "spec.ports[0].port".
	// List items matched by key are written [key=value] (several keys joined
	// by commas), items matched by index [N], and set members [=value].
	Path string `json:"path"`
	// Live is the value in the live object, nil when absent.
	Live any `json:"live"`
	// Desired is the value Git wants; nil when Git no longer sets a field
	// recond owns (applying removes it).
	//
	// In a Secret, a value under data or stringData is never shown: Live
	// and Desired hold "<secret sha256:3f2a9c1e>", eight hex digits of a
	// salted hash of the (decoded) value, so that a change is visible but
	// the value is not; a whole map keeps its keys with each value masked.
	Desired any `json:"desired"`
}

// Change is the outcome of comparing one desired object with its live
// counterpart.
type Change struct {
	// Kind and Name identify the object in messages, e.g. "Deployment", "web".
	Kind, Name string
	Action     Action
	// Fields lists the differences of an Update, sorted by Path.
	Fields []FieldDiff
	// Uncertain is set when the local comparison cannot decide: every
	// difference is a desired field absent from the live object, which the
	// server may have transformed. The caller confirms with a server-side
	// dry-run (see Equivalent). Action stays Update.
	Uncertain bool
	// Desired is nil for Delete; Live is nil for Create. They are what
	// applying writes and hold real values, Secret data included: logs and
	// JSON show a Change through String, LogValue and MarshalJSON, which
	// leave them out.
	Desired, Live *unstructured.Unstructured
}

// Options tunes a comparison.
type Options struct {
	// Manager is the field manager whose Apply managedFields entry marks what
	// recond owns ("recond"). Empty disables detection of removed fields.
	Manager string
	// IgnoreAnnotations lists annotation keys that are never compared, such
	// as "recond.dev/revision", which moves with every commit.
	IgnoreAnnotations []string
	// Types tells quantities, int-or-strings and durations apart by the
	// server's schema. Nil, or no schema for a kind, falls back to rules by
	// field name (quantities under limits, requests and hard, and in
	// sizeLimit and storage).
	Types FieldTypes
	// SecretSalt salts the hashes that stand for a Secret's values in
	// differences (see FieldDiff). Empty uses a random salt made once per
	// process, so a mask never is a plain hash of the value.
	SecretSalt []byte
	// Sensitive are values masked wherever a difference shows them, in any
	// object (decrypted values; see Sensitive). Nil masks only Secrets.
	Sensitive *Sensitive
}

// Object compares a desired object with the live one. A nil live object
// yields Create, a nil desired object Delete.
func Object(desired, live *unstructured.Unstructured, opts Options) Change {
	switch {
	case desired == nil && live == nil:
		return Change{Action: Unchanged}
	case desired == nil:
		return Change{Kind: live.GetKind(), Name: live.GetName(), Action: Delete, Live: live}
	case live == nil:
		return Change{Kind: desired.GetKind(), Name: desired.GetName(), Action: Create, Desired: desired}
	}
	c := Change{Kind: desired.GetKind(), Name: desired.GetName(), Action: Unchanged, Desired: desired, Live: live}

	w := newWalker(opts, desiredSkips, desired.GroupVersionKind())
	w.secret = w.secret || isSecret(live.GroupVersionKind())
	w.root, w.liveRoot = desired.Object, live.Object
	w.subset("", "", "", desired.Object, live.Object)
	w.removals(desired.Object, live.Object, owned(live, opts.Manager))
	if len(w.diffs) > 0 {
		c.Action = Update
		c.Fields = w.sorted()
		c.Uncertain = !w.certain
	}
	return c
}

// Objects compares every desired object with its live counterpart, paired by
// API group, kind, namespace and name (the API version is ignored, so
// apps/v1 and apps/v1beta2 pair). A live object no desired object pairs with
// is a Delete. The result follows the desired order, then the deletes sorted
// by group, kind, namespace and name. Nil entries are skipped.
func Objects(desired, live []*unstructured.Unstructured, opts Options) []Change {
	byKey := make(map[objectKey]*unstructured.Unstructured, len(live))
	for _, l := range live {
		if l == nil {
			continue
		}
		if k := keyOf(l); byKey[k] == nil {
			byKey[k] = l
		}
	}
	paired := make(map[objectKey]bool, len(desired))
	changes := make([]Change, 0, len(desired))
	for _, d := range desired {
		if d == nil {
			continue
		}
		k := keyOf(d)
		paired[k] = true
		changes = append(changes, Object(d, byKey[k], opts))
	}
	var deletes []objectKey
	for k := range byKey {
		if !paired[k] {
			deletes = append(deletes, k)
		}
	}
	slices.SortFunc(deletes, func(a, b objectKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.kind, b.kind),
			cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	for _, k := range deletes {
		changes = append(changes, Object(nil, byKey[k], opts))
	}
	return changes
}

// Equivalent compares a server-side dry-run result with the live object in
// full, ignoring status, the server-maintained metadata (resourceVersion,
// generation, managedFields, creationTimestamp, uid, selfLink) and
// opts.IgnoreAnnotations. A zero value equals an absent field. It returns the
// differences sorted by Path, with the dry-run value as Desired; empty means
// applying changes nothing.
func Equivalent(dryRun, live *unstructured.Unstructured, opts Options) []FieldDiff {
	var (
		d, l map[string]any
		gvk  schema.GroupVersionKind
	)
	if live != nil {
		l, gvk = live.Object, live.GroupVersionKind()
	}
	if dryRun != nil {
		d, gvk = dryRun.Object, dryRun.GroupVersionKind()
	}
	w := newWalker(opts, equivalentSkips, gvk)
	w.secret = w.secret || (live != nil && isSecret(live.GroupVersionKind()))
	w.root, w.liveRoot = d, l
	w.full("", "", "", d, l)
	return w.sorted()
}

// String renders the change for logs: "Deployment/web: create",
// "ConfigMap/old: delete", "Deployment/web: unchanged", or for an update one
// line per field, "Deployment/web spec.replicas: 2 -> 1" (live -> desired,
// values as JSON, <none> when absent), preceded by
// "Secret/creds: update (uncertain)" when Uncertain.
func (c Change) String() string {
	id := c.Kind + "/" + c.Name
	if c.Action != Update || len(c.Fields) == 0 {
		return id + ": " + string(c.Action)
	}
	var b strings.Builder
	if c.Uncertain {
		fmt.Fprintf(&b, "%s: update (uncertain)\n", id)
	}
	for i, f := range c.Fields {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s %s: %s -> %s", id, f.Path, display(f.Live), display(f.Desired))
	}
	return b.String()
}

func display(v any) string {
	if v == nil {
		return "<none>"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a mask reads <secret ...>, not \u003csecret ...\u003e
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

type objectKey struct{ group, kind, namespace, name string }

func keyOf(u *unstructured.Unstructured) objectKey {
	gvk := u.GroupVersionKind()
	return objectKey{gvk.Group, gvk.Kind, u.GetNamespace(), u.GetName()}
}
