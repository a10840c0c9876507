package reconcile

import (
	"context"
	"crypto/rand"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/loop"
	"recond.dev/recond/reconcile/source"
)

// Source is where the desired state comes from (reconcile/source.Source).
type Source interface {
	Fetch(ctx context.Context) (source.Revision, error)
	Render(ctx context.Context, sha string) ([]source.Manifest, error)
	DisplayURL() string
}

// Live is where the observe phase learns what exists: the API server at
// every tick (cluster.Client, --observe=list) or a watch-fed cache
// (reconcile/watch, --observe=watch). Both return objects with apiVersion
// and kind set, in the version gvk names (or the server's preferred one).
// The objects may be shared with a cache: the phases never modify them.
type Live interface {
	// List returns the objects of kind gvk in the namespace that match the
	// label selector.
	List(ctx context.Context, gvk schema.GroupVersionKind, selector string) ([]unstructured.Unstructured, error)
	// Get returns one object of the namespace, or nil when it does not
	// exist.
	Get(ctx context.Context, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error)
}

// LiveCost is implemented by a Live that can tell what observing cost, so
// that the tick's span and metrics tell the truth about a cache: its
// counters only grow (the tick reports the difference), the age is now.
type LiveCost interface {
	Cost() ObserveCost
}

// Config is what a Reconciler holds its namespace to.
type Config struct {
	Namespace  string // the one namespace recond manages
	Name       string // instance name (label recond.dev/instance)
	Path       string // --path, for the source annotation
	Prune      bool   // delete owned objects that left Git
	SelfHeal   bool   // write drift back; false: report it until a new revision arrives
	DryRun     bool   // never write
	AllowEmpty bool   // allow an empty desired set to prune everything
	// ApplyConcurrency bounds the writes (and validating dry runs) made at
	// once within one dependency wave; 0 means 1.
	ApplyConcurrency int
	// Live is where observe reads live objects; nil means the API server
	// (a LIST per kind at every tick).
	Live Live
	// HealthRules are the per-kind CEL rules (--health-rules); nil: kstatus
	// and recond's reading of custom resources only.
	HealthRules *health.Rules
	// HealthTimeout is how long an object may stay in progress after recond
	// wrote it (or after it started progressing) before it counts as failed;
	// 0 means DefaultHealthTimeout.
	HealthTimeout time.Duration
	// MayWrite, when set, is asked before every write (and every validating
	// dry run) of the apply phase, the inventory's included: an error (this
	// process no longer holds the instance's Lease) fails the tick in apply
	// with reason conflict, and nothing more is written or pruned
	// (leader.Elector.MayWrite). nil: always.
	MayWrite func() error
	// HookTimeout is how long a chart's hook may run before it counts as
	// failed; 0 means DefaultHookTimeout.
	HookTimeout time.Duration
	// SuspendMax is how long a suspension lasts at most (and without an
	// end of its own); 0 means DefaultSuspendMax.
	SuspendMax time.Duration
	// KeysSecret is the name of the Secret that holds the SOPS keys
	// (--sops-keys-secret): reserved, like recond's own objects, so that no
	// commit or hook writes, prunes or replaces it. Empty: recond-sops.
	KeysSecret string
	// HookMax and HookMaxBytes bound a revision's hooks: their number, and
	// the bytes of their state in the inventory; 0: the defaults.
	HookMax      int
	HookMaxBytes int
}

// Observer is told about every tick and phase. Metrics, tracing and logs
// implement it; phases never call them. Start methods may return a derived
// context (a span), which the phase then runs in.
type Observer interface {
	TickStart(ctx context.Context) context.Context
	PhaseStart(ctx context.Context, p Phase) context.Context
	PhaseEnd(ctx context.Context, pr PhaseResult, r *Result)
	TickEnd(ctx context.Context, r *Result)
}

// Reconciler is the tick engine: it runs ticks (read, observe, diff,
// apply, health; each a method of the tick, tick.go) and keeps what they
// learn between ticks in its memory (memory.go: the inventory, the render
// of the revision, what the server showed equivalent, the validated
// creates, each object's health progress, ...). It is not safe for
// concurrent ticks: its Loop never overlaps them.
type Reconciler struct {
	// Loop schedules the ticks (reconcile/loop): triggers, debounce, the
	// ticks' numbers, abandoned phases; its methods (Trigger, Request,
	// Progress) are the Reconciler's. ticks is the engine's side of it.
	*loop.Loop
	ticks     *loop.Ticks
	cfg       Config
	src       Source
	kube      *cluster.Client
	live      Live // cfg.Live, or kube
	observers []Observer
	log       *slog.Logger
	// salt salts the hashes that stand for Secret values in differences.
	salt []byte
	// abandonAfter is how long a phase may run past the tick's deadline (or
	// the loop's stop) before its tick abandons it.
	abandonAfter time.Duration
	// mem is what the engine keeps between ticks, behind one mutex.
	mem memory
	// gate is asked before every write (gate.go).
	gate *writeGate
}

// New returns a Reconciler. Observers are called in order at starts and in
// reverse order at ends.
func New(cfg Config, src Source, kube *cluster.Client, log *slog.Logger, observers ...Observer) *Reconciler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	l, ticks := loop.New(log)
	r := &Reconciler{Loop: l, ticks: ticks, cfg: cfg, src: src, kube: kube, live: cfg.Live, log: log, observers: observers,
		salt: salt, abandonAfter: AbandonAfter}
	if r.live == nil {
		r.live = kube
	}
	r.gate = newWriteGate(r)
	if kube != nil {
		kube.SetGate(r.gate)
	}
	return r
}
