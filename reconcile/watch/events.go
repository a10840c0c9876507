package watch

import (
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/diff"
)

// Event types.
const (
	EventUpdate = "update"
	EventDelete = "delete"
)

// Event is a change to a cached object that recond did not make itself.
type Event struct {
	Kind string // the object's kind
	Name string // the object's name in the namespace
	// Type is EventUpdate or EventDelete.
	Type string
	// Manager is the field manager whose managedFields entry the change
	// added or advanced, when one did ("" when unknown: always for deletes).
	Manager string
	// Subresource is that entry's subresource ("status" for a controller's
	// status write), so that a caller can filter.
	Subresource string
	// At is when the cache saw the change.
	At time.Time
}

// classifyUpdate tells whether an update from old to new was made by
// manager alone (own is true), and otherwise which other manager made it.
//
// An update is manager's own when manager's entries changed and no other
// entry appeared or advanced its time. Another entry shrinking or vanishing
// is what a forced apply by manager does to the fields it takes over, so it
// does not count against own. An update that changed no entry at all (two
// writes within the same second leave the same timestamps) is not own: it
// may be drift, and a spurious tick costs little while a missed one costs
// the heal.
func classifyUpdate(old, new *unstructured.Unstructured, manager string) (own bool, other, subresource string) {
	oldF, newF := diff.ManagedFields(old), diff.ManagedFields(new)
	var mineOld, mineNew []metav1.ManagedFieldsEntry
	prev := map[entryKey]time.Time{}
	for _, e := range oldF {
		if e.Manager == manager {
			mineOld = append(mineOld, e)
			continue
		}
		prev[keyOf(e)] = entryTime(e)
	}
	var newest time.Time
	othersMoved := false
	for _, e := range newF {
		if e.Manager == manager {
			mineNew = append(mineNew, e)
			continue
		}
		t, seen := prev[keyOf(e)]
		if seen && !entryTime(e).After(t) {
			continue
		}
		othersMoved = true
		if other == "" || entryTime(e).After(newest) {
			other, subresource, newest = e.Manager, e.Subresource, entryTime(e)
		}
	}
	mineMoved := !reflect.DeepEqual(mineOld, mineNew)
	return mineMoved && !othersMoved, other, subresource
}

type entryKey struct{ manager, operation, subresource string }

func keyOf(e metav1.ManagedFieldsEntry) entryKey {
	return entryKey{e.Manager, string(e.Operation), e.Subresource}
}

func entryTime(e metav1.ManagedFieldsEntry) time.Time {
	if e.Time == nil {
		return time.Time{}
	}
	return e.Time.Time
}
