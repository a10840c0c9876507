package reconcile

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/source"
)

// Source is where the desired state comes from (reconcile/source.Source).
type Source interface {
	Fetch(ctx context.Context) (source.Revision, error)
	Render(ctx context.Context, sha string) ([]source.Manifest, error)
	DisplayURL() string
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

// Reconciler runs ticks. It is not safe for concurrent ticks: Run never
// overlaps them.
type Reconciler struct {
	cfg       Config
	src       Source
	kube      *cluster.Client
	observers []Observer
	log       *slog.Logger
	inv       *inventory // nil until first loaded
	// equivalent remembers what the server showed to change nothing.
	equivalent equivalence
	// salt salts the hashes that stand for Secret values in differences.
	salt []byte
}

// New returns a Reconciler. Observers are called in order at starts and in
// reverse order at ends.
func New(cfg Config, src Source, kube *cluster.Client, log *slog.Logger, observers ...Observer) *Reconciler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	return &Reconciler{cfg: cfg, src: src, kube: kube, log: log, observers: observers, equivalent: equivalence{}, salt: salt}
}

// State is what the phases of one tick hand each other.
type State struct {
	cfg  Config
	ctx  context.Context // the tick's: done when the loop stops or the tick times out
	stop <-chan struct{} // ctx.Done()

	Revision string
	Fetched  bool
	Desired  []*unstructured.Unstructured // decorated with recond's labels and annotations
	Live     []*unstructured.Unstructured // owned objects, plus unowned desired ones found by GET
	Changes  []diff.Change                // create, update and delete only
	unserved []schema.GroupVersionKind    // inventory kinds the server does not serve now
	pruned   []schema.GroupVersionKind    // kinds of the objects this tick deleted
	Ops      []Operation
	Counts   Counts
	wrote    bool
	// Terminating are the owned objects being deleted ("Kind/name"): not
	// written or deleted again until they are gone.
	Terminating []string
	// Equivalent are the objects the local diff saw differ but the server
	// has shown applying them changes nothing ("Kind/name").
	Equivalent []string
}

type phaseFunc func(ctx context.Context, st *State) error

// Tick runs one full tick: read, observe, diff, apply.
func (r *Reconciler) Tick(ctx context.Context) *Result {
	return r.tick(ctx, false)
}

// Plan runs read, observe and diff, and writes nothing (`recond diff`).
func (r *Reconciler) Plan(ctx context.Context) *Result {
	return r.tick(ctx, true)
}

func (r *Reconciler) tick(ctx context.Context, planOnly bool) *Result {
	res := &Result{Start: time.Now(), DryRun: r.cfg.DryRun}
	for _, o := range r.observers {
		ctx = o.TickStart(ctx)
	}
	st := &State{cfg: r.cfg, ctx: ctx, stop: ctx.Done()}
	phases := []struct {
		p  Phase
		fn phaseFunc
	}{{PhaseRead, r.read}, {PhaseObserve, r.observe}, {PhaseDiff, r.diff}, {PhaseApply, r.apply}}
	if planOnly {
		phases = phases[:3]
	}
	for _, ph := range phases {
		pctx := ctx
		if ph.p == PhaseApply {
			// Apply finishes the object it is writing when the loop is
			// stopped (it checks st.stop between objects); only the tick
			// deadline cuts a call short.
			pctx = context.WithoutCancel(ctx)
			if d, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				pctx, cancel = context.WithDeadlineCause(pctx, d, errTickTimeout)
				defer cancel()
			}
		}
		if !r.runPhase(pctx, ph.p, ph.fn, st, res) {
			break
		}
	}
	res.Revision, res.Fetched = st.Revision, st.Fetched
	res.Changes, res.Ops, res.Counts = st.Changes, st.Ops, st.Counts
	res.Terminating, res.Equivalent = st.Terminating, st.Equivalent
	res.Duration = time.Since(res.Start)
	switch {
	case res.Failure() != nil:
		res.Outcome = OutcomeFailed
	case st.wrote:
		res.Outcome = OutcomeApplied
	case len(st.Changes) > 0:
		res.Outcome = OutcomeOutOfSync
	default:
		res.Outcome = OutcomeConverged
	}
	for i := len(r.observers) - 1; i >= 0; i-- {
		r.observers[i].TickEnd(ctx, res)
	}
	return res
}

// runPhase is the one wrapper every phase runs in: it tells the observers,
// times the phase, recovers a panic, and classifies the error once.
func (r *Reconciler) runPhase(ctx context.Context, p Phase, fn phaseFunc, st *State, res *Result) bool {
	for _, o := range r.observers {
		ctx = o.PhaseStart(ctx, p)
	}
	start := time.Now()
	err := safeRun(ctx, fn, st)
	pr := PhaseResult{Phase: p, Duration: time.Since(start)}
	if err != nil {
		if cause := context.Cause(ctx); cause == errTickTimeout {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		pr.Err = &PhaseError{Phase: p, Reason: Classify(err), Err: err}
	}
	res.Phases = append(res.Phases, pr)
	for i := len(r.observers) - 1; i >= 0; i-- {
		r.observers[i].PhaseEnd(ctx, pr, res)
	}
	return err == nil
}

func safeRun(ctx context.Context, fn phaseFunc, st *State) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return fn(ctx, st)
}

// stopped returns an error when the tick's context is done: the loop was
// asked to stop, or the tick timed out. Apply calls it between objects.
func (st *State) stopped() error {
	select {
	case <-st.stop:
		return fmt.Errorf("%w: %w", errStopped, context.Cause(st.ctx))
	default:
		return nil
	}
}
