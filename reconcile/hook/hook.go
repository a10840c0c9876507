package hook

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// The delete policies of a hook (helm.sh/hook-delete-policy).
const (
	// BeforeCreation deletes the object a previous run left before the
	// hook is created again (Helm's default).
	BeforeCreation = "before-hook-creation"
	// Succeeded deletes the hook's object once it succeeded.
	Succeeded = "hook-succeeded"
	// Failed deletes the hook's object once it failed.
	Failed = "hook-failed"
)

// DefaultTimeout is how long a hook may run before it counts as failed
// (--helm-hook-timeout's default).
const DefaultTimeout = 5 * time.Minute

// Poll is how soon the loop comes back to a hook that is still running (a
// hook is not an owned object: no watch event asks for it).
const Poll = 2 * time.Second

// Hook is one hook object of a revision, as its annotations describe it.
type Hook struct {
	Object *unstructured.Unstructured
	// Events are what it runs for ("pre-install", "post-upgrade"), lower
	// case.
	Events []string
	// Weight orders it within its events (lowest first).
	Weight int
	// Policies are its delete policies (BeforeCreation when it names none).
	Policies []string
}

// New reads the hook annotations of obj.
func New(obj *unstructured.Unstructured) *Hook {
	a := obj.GetAnnotations()
	h := &Hook{Object: obj}
	for _, e := range strings.Split(a[keys.AnnotationHook], ",") {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			h.Events = append(h.Events, e)
		}
	}
	h.Weight, _ = strconv.Atoi(strings.TrimSpace(a[keys.AnnotationHookWeight]))
	for _, p := range strings.Split(a[keys.AnnotationHookDelete], ",") {
		if p = strings.TrimSpace(p); p != "" {
			h.Policies = append(h.Policies, p)
		}
	}
	if len(h.Policies) == 0 {
		h.Policies = []string{BeforeCreation} // Helm's default
	}
	return h
}

// Key is "Kind/name".
func (h *Hook) Key() string { return h.Object.GetKind() + "/" + h.Object.GetName() }

// Has reports whether h has delete policy p.
func (h *Hook) Has(p string) bool { return slices.Contains(h.Policies, p) }
