package verdict

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(rv, rev, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "resourceVersion": rv, "annotations": map[string]any{"recond.dev/revision": rev}},
		"data":     map[string]any{"v": value},
	}}
	return u
}

// A verdict holds while neither side changes: the live object's
// resourceVersion, or the desired object (its revision annotation aside).
func TestVerdictHoldsUntilEitherSideChanges(t *testing.T) {
	var b Book
	b.At("r1")
	desired, live := object("", "r1", "one"), object("7", "", "one")
	b.Remember("ConfigMap/a", desired, live, Server)
	if v, ok := b.Holds("ConfigMap/a", desired, live); !ok || v != Server {
		t.Fatalf("Holds = %v, %v; want Server", v, ok)
	}
	if _, ok := b.Holds("ConfigMap/a", desired, object("8", "", "one")); ok {
		t.Error("held after the live object changed")
	}
	b.At("r2")
	if _, ok := b.Holds("ConfigMap/a", object("", "r2", "one"), live); !ok {
		t.Error("a new revision that leaves the object as it was dropped the verdict")
	}
	if _, ok := b.Holds("ConfigMap/a", object("", "r2", "two"), live); ok {
		t.Error("held after the desired object changed")
	}
	if !b.Applied("ConfigMap/a", object("", "r3", "one")) {
		t.Error("Applied is false for the desired object last remembered")
	}
	b.Forget("ConfigMap/a")
	if _, ok := b.Holds("ConfigMap/a", desired, live); ok {
		t.Error("held after Forget")
	}
	// A live object without a resourceVersion is not remembered.
	b.Remember("ConfigMap/a", desired, object("", "", "one"), Same)
	if _, ok := b.Holds("ConfigMap/a", desired, object("", "", "one")); ok {
		t.Error("remembered a live object without a resourceVersion")
	}
}

// A dry run's acceptance of a create holds for ValidFor, for the desired
// object as it was, until the create is written.
func TestAcceptedCreateExpires(t *testing.T) {
	var b Book
	now := time.Unix(1_800_000_000, 0)
	d := object("", "r1", "one")
	b.Accept("ConfigMap/a", d, now)
	if !b.Accepted("ConfigMap/a", d, now.Add(ValidFor)) {
		t.Error("not accepted within ValidFor")
	}
	if b.Accepted("ConfigMap/a", object("", "r1", "two"), now) {
		t.Error("accepted for another desired object")
	}
	b.Expire(now.Add(ValidFor + time.Second))
	if b.Accepted("ConfigMap/a", d, now) {
		t.Error("accepted after Expire")
	}
	b.Accept("ConfigMap/a", d, now)
	b.Created("ConfigMap/a")
	if b.Accepted("ConfigMap/a", d, now) {
		t.Error("accepted after the create was written")
	}
}
