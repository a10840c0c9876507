package verdict

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// Verdict is how a desired object was found equivalent to a live one.
type Verdict uint8

const (
	// Written: the live object is the result of applying the desired one
	// (not compared yet).
	Written Verdict = iota
	// Same: the local comparison found no difference.
	Same
	// Server: the local comparison saw a difference that the server
	// showed to change nothing (a dry run): a normalisation gap.
	Server
)

// ValidFor is how long a dry run's acceptance of a create is trusted:
// admission, quotas and schemas change.
const ValidFor = 10 * time.Minute

// Book remembers, per object, a desired object (by hash) that the server
// has shown to be equivalent to a live object (by resourceVersion):
// applying it changed nothing, or the object is the result of applying it.
// Where the local comparison still sees a difference (a normalisation it
// does not know), the object is reported converged instead of being
// rewritten at every tick, until either side changes. Kept in memory:
// after a restart the apply phase's dry run finds the same again without
// writing. It also remembers the creates a dry run accepted (Accepted).
// The zero Book is ready.
type Book struct {
	m map[string]entry
	// hashes caches Hash per desired object of the revision rev (the
	// render is reused while the revision does not move).
	rev    string
	hashes map[*unstructured.Unstructured]string
	// accepted are the creates a dry run accepted, by object key.
	accepted map[string]acceptance
}

type entry struct {
	hash, resourceVersion string
	verdict               Verdict
}

type acceptance struct {
	hash string
	at   time.Time
}

// At starts a tick at revision rev: hashes of another revision's objects
// are dropped.
func (b *Book) At(rev string) {
	if rev != b.rev || b.hashes == nil {
		b.rev, b.hashes = rev, map[*unstructured.Unstructured]string{}
	}
}

// HashOf returns Hash(u), once per object of the revision.
func (b *Book) HashOf(u *unstructured.Unstructured) string {
	if h, ok := b.hashes[u]; ok {
		return h
	}
	h := Hash(u)
	if b.hashes == nil {
		b.hashes = map[*unstructured.Unstructured]string{}
	}
	b.hashes[u] = h
	return h
}

// Remember records that desired (the object key) is equivalent to live,
// and how that is known.
func (b *Book) Remember(key string, desired, live *unstructured.Unstructured, how Verdict) {
	if live == nil || live.GetResourceVersion() == "" {
		return
	}
	if b.m == nil {
		b.m = map[string]entry{}
	}
	b.m[key] = entry{hash: b.HashOf(desired), resourceVersion: live.GetResourceVersion(), verdict: how}
}

// Holds reports whether desired is known equivalent to live as it is now,
// and how.
func (b *Book) Holds(key string, desired, live *unstructured.Unstructured) (Verdict, bool) {
	got, found := b.m[key]
	if !found || got.resourceVersion != live.GetResourceVersion() || got.hash != b.HashOf(desired) {
		return 0, false
	}
	return got.verdict, true
}

// Applied reports whether desired, as it is, is what recond last applied
// (or found equivalent) for its object: Git has not changed it since.
func (b *Book) Applied(key string, desired *unstructured.Unstructured) bool {
	got, ok := b.m[key]
	return ok && got.hash == b.HashOf(desired)
}

// Forget drops what was remembered of an object.
func (b *Book) Forget(key string) { delete(b.m, key) }

// Accept records that a dry run accepted the create of desired at now.
func (b *Book) Accept(key string, desired *unstructured.Unstructured, now time.Time) {
	if b.accepted == nil {
		b.accepted = map[string]acceptance{}
	}
	b.accepted[key] = acceptance{hash: b.HashOf(desired), at: now}
}

// Expire forgets the acceptances older than ValidFor at now.
func (b *Book) Expire(now time.Time) {
	for k, a := range b.accepted {
		if now.Sub(a.at) > ValidFor {
			delete(b.accepted, k)
		}
	}
}

// Accepted reports whether a dry run accepted the create of desired, as it
// is, less than ValidFor before now.
func (b *Book) Accepted(key string, desired *unstructured.Unstructured, now time.Time) bool {
	h := b.HashOf(desired)
	got, ok := b.accepted[key]
	return ok && h != "" && got.hash == h && now.Sub(got.at) <= ValidFor
}

// Created forgets an acceptance once its create was written.
func (b *Book) Created(key string) { delete(b.accepted, key) }

// Hash hashes a desired object without its revision annotation, which
// moves with every commit without changing the object.
func Hash(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	ann := c.GetAnnotations()
	delete(ann, keys.AnnotationRevision)
	c.SetAnnotations(ann)
	b, err := json.Marshal(c.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
