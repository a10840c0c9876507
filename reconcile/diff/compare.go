package diff

import (
	"cmp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Paths never compared. desiredSkips also holds the object's identity
// (apiVersion, kind, name, namespace), which pairs objects rather than
// differing between them.
var (
	serverMetadata = []string{
		"status", "metadata.resourceVersion", "metadata.uid", "metadata.generation",
		"metadata.creationTimestamp", "metadata.managedFields", "metadata.selfLink",
	}
	desiredSkips = append([]string{
		"apiVersion", "kind", "metadata.name", "metadata.namespace",
		"metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds",
	}, serverMetadata...)
	// kubectl's copy of the applied object is not compared by Equivalent: a
	// watch cache drops it from live objects, and it says nothing about
	// what recond's apply changes.
	equivalentSkips = append([]string{"metadata.annotations.kubectl.kubernetes.io/last-applied-configuration"}, serverMetadata...)
)

// walker walks two decoded objects and collects their differences.
type walker struct {
	skip  map[string]bool
	diffs []FieldDiff
	// types, when set, tells field types by the schema of kind gvk; stack
	// is the schema path of the value being compared (Item for list items).
	types FieldTypes
	gvk   schema.GroupVersionKind
	stack []string
	// secret masks the values of data and stringData (salted with salt) in
	// every difference: the object is a Secret.
	secret bool
	salt   []byte
	// sensitive masks, in any object, a difference that holds one of its
	// values (and a removal from an object, root, that holds one).
	sensitive *Sensitive
	root      map[string]any
	// masked are the fields both objects' MaskedFieldsAnnotation name,
	// read at the first difference (liveRoot is the live object).
	liveRoot     map[string]any
	masked       []string
	maskedLoaded bool
	// certain is set once a difference has a live value: real drift rather
	// than a field the server may have transformed away.
	certain bool
}

// newWalker prepares a comparison of objects of kind gvk.
func newWalker(opts Options, skips []string, gvk schema.GroupVersionKind) *walker {
	w := &walker{
		skip:  make(map[string]bool, len(skips)+len(opts.IgnoreAnnotations)),
		types: opts.Types, gvk: gvk, stack: make([]string, 0, 16),
		secret: isSecret(gvk), salt: opts.SecretSalt, sensitive: opts.Sensitive,
	}
	for _, p := range skips {
		w.skip[p] = true
	}
	for _, a := range opts.IgnoreAnnotations {
		w.skip[join("metadata.annotations", a)] = true
	}
	return w
}

// add records a difference. In a Secret, the values under data and
// stringData are masked here, the one place every difference passes.
func (w *walker) add(path string, live, desired any) {
	if live != nil {
		w.certain = true
	}
	switch {
	case w.sensitive != nil && (w.sensitive.In(live) || w.sensitive.In(desired) || w.sensitive.Contains(path) ||
		desired == nil && w.sensitive.In(w.root)),
		inMasked(path, w.maskedFields()):
		// A decrypted value (or the old value of a field removed from an
		// object that holds one, or of a field that held one when it was
		// written): both sides are masked, anywhere, keys that hold one
		// too.
		path = w.maskPath(path)
		live, desired = w.maskSensitive(path, live), w.maskSensitive(path, desired)
	case w.secret:
		live, desired = w.mask(path, live), w.mask(path, desired)
	}
	w.diffs = append(w.diffs, FieldDiff{Path: path, Live: live, Desired: desired})
}

// maskText is the mask of a text (a key).
func (w *walker) maskText(t string) string { return Mask(w.salt, []byte(t)) }

// maskedFields are the fields the compared objects' MaskedFieldsAnnotation
// name (read once, at the first difference: a converged object costs
// nothing).
func (w *walker) maskedFields() []string {
	if !w.maskedLoaded {
		w.maskedLoaded = true
		w.masked = append(maskedFields(w.root), maskedFields(w.liveRoot)...)
	}
	return w.masked
}

func (w *walker) sorted() []FieldDiff {
	slices.SortStableFunc(w.diffs, func(a, b FieldDiff) int { return cmp.Compare(a.Path, b.Path) })
	return w.diffs
}

// subset compares the desired value d at path with the live value l, looking
// only at what d sets. key is d's map key and parent the key of the map
// holding it (both empty inside list items); without a schema they tell
// quantities apart.
func (w *walker) subset(path, parent, key string, d, l any) {
	switch dv := d.(type) {
	case nil:
	case map[string]any:
		lm, ok := l.(map[string]any)
		if !ok && l != nil {
			w.add(path, l, d)
			return
		}
		for k, v := range dv {
			if p := join(path, k); !w.skip[p] {
				w.push(k)
				w.subset(p, key, k, v, lm[k])
				w.pop()
			}
		}
	case []any:
		w.subsetList(path, key, dv, l)
	default:
		if l == nil {
			if !isZero(d) {
				w.add(path, nil, d)
			}
		} else if !scalarEqual(w.typeOf(parent, key), d, l) {
			w.add(path, l, d)
		}
	}
}

func (w *walker) subsetList(path, field string, d []any, l any) {
	if l == nil {
		if len(d) > 0 {
			w.add(path, nil, d)
		}
		return
	}
	lv, ok := l.([]any)
	if !ok {
		w.add(path, l, d)
		return
	}
	if k := keyFor(field, d, lv); k != nil {
		for _, item := range d {
			p := path + "[" + k.selector(item) + "]"
			if li := k.find(lv, item); li != nil {
				w.push(Item)
				w.subset(p, "", "", item, li)
				w.pop()
			} else {
				w.add(p, nil, item)
			}
		}
		return
	}
	if len(d) > 0 && allMaps(d) {
		if len(d) != len(lv) {
			w.add(path, l, d)
			return
		}
		w.push(Item)
		for i := range d {
			w.subset(path+"["+strconv.Itoa(i)+"]", "", "", d[i], lv[i])
		}
		w.pop()
		return
	}
	if !deepEqual(d, lv) {
		w.add(path, l, d)
	}
}

// full compares d and l in both directions; a zero value equals an absent
// one.
func (w *walker) full(path, parent, key string, d, l any) {
	if isZero(d) && isZero(l) {
		return
	}
	dm, dMap := d.(map[string]any)
	lm, lMap := l.(map[string]any)
	if (dMap || d == nil) && (lMap || l == nil) {
		for k, v := range dm {
			if p := join(path, k); !w.skip[p] {
				w.push(k)
				w.full(p, key, k, v, lm[k])
				w.pop()
			}
		}
		for k, v := range lm {
			if _, both := dm[k]; !both {
				if p := join(path, k); !w.skip[p] {
					w.push(k)
					w.full(p, key, k, nil, v)
					w.pop()
				}
			}
		}
		return
	}
	dl, dList := d.([]any)
	ll, lList := l.([]any)
	if (dList || d == nil) && (lList || l == nil) {
		w.fullList(path, d, l, dl, ll)
		return
	}
	if d == nil || l == nil || !scalarEqual(w.typeOf(parent, key), d, l) {
		w.add(path, l, d)
	}
}

func (w *walker) fullList(path string, d, l any, dl, ll []any) {
	w.push(Item)
	defer w.pop()
	if nameKey.fits(dl) && nameKey.fits(ll) {
		for _, item := range dl {
			p := path + "[" + nameKey.selector(item) + "]"
			if li := nameKey.find(ll, item); li != nil {
				w.full(p, "", "", item, li)
			} else {
				w.add(p, nil, item)
			}
		}
		for _, item := range ll {
			if nameKey.find(dl, item) == nil {
				w.add(path+"["+nameKey.selector(item)+"]", item, nil)
			}
		}
		return
	}
	if len(dl) != len(ll) {
		w.add(path, l, d)
		return
	}
	for i := range dl {
		w.full(path+"["+strconv.Itoa(i)+"]", "", "", dl[i], ll[i])
	}
}
