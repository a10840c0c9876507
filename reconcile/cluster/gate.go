package cluster

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Purpose is why recond writes: the write gate's rules differ by it (a
// hook may replace only a hook, a recreate must not take a claim with it).
type Purpose string

// Every purpose a write can have.
const (
	// PurposeApply is a server-side apply of a desired object.
	PurposeApply Purpose = "apply"
	// PurposePrune deletes an owned object that left Git.
	PurposePrune Purpose = "prune"
	// PurposeOrphan removes recond's labels from an object that left Git
	// with recond.dev/prune: disabled.
	PurposeOrphan Purpose = "orphan"
	// PurposeRecreate deletes an object to create it again
	// (recond.dev/force: recreate), and creates it.
	PurposeRecreate Purpose = "recreate"
	// PurposeHook creates a chart's hook, or deletes one (its delete
	// policies, or before creating it again).
	PurposeHook Purpose = "hook"
	// PurposeInventory writes the instance's inventory ConfigMap.
	PurposeInventory Purpose = "inventory"
	// PurposeSuspension writes the suspension's annotations on the
	// inventory ConfigMap.
	PurposeSuspension Purpose = "suspension"
	// PurposeSeed creates the instance's seed Secret (a chart's random
	// functions).
	PurposeSeed Purpose = "seed"
)

// Verb is the API server's verb a write uses.
type Verb string

// The write verbs.
const (
	VerbApply  Verb = "apply"
	VerbCreate Verb = "create"
	VerbDelete Verb = "delete"
	VerbPatch  Verb = "patch"
)

// Write is one write recond is about to make, as the gate sees it.
type Write struct {
	Purpose Purpose
	Verb    Verb
	GVK     schema.GroupVersionKind
	Name    string
	// Object is what is applied (VerbApply); nil otherwise.
	Object *unstructured.Unstructured
	// Live is the object as recond last saw it, when it knows (a prune's,
	// a hook's previous run, a recreate's); nil: not known, or absent.
	Live *unstructured.Unstructured
}

// Gate is asked before every write the Client makes. A nil error lets the
// write through; done is then called once the request returned, with its
// error. Nothing else in recond reaches the API server's write verbs
// (TestEveryWriteIsGated).
type Gate interface {
	Admit(ctx context.Context, w Write) (done func(error), err error)
}

// ErrNoGate is a write asked of a Client that has no gate: refused, so that
// a client built without one can read and dry-run, never write.
var ErrNoGate = errors.New("refused to write: no write gate")

// SetGate makes g the gate of every write. Call it before the first write.
func (c *Client) SetGate(g Gate) { c.gate = g }

// admit asks the gate about w.
func (c *Client) admit(ctx context.Context, w Write) (func(error), error) {
	if c.gate == nil {
		return nil, ErrNoGate
	}
	done, err := c.gate.Admit(ctx, w)
	if err != nil {
		return nil, err
	}
	if done == nil {
		done = func(error) {}
	}
	return done, nil
}
