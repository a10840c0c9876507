package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/decorate"
	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/optout"
	"recond.dev/recond/reconcile/source"
)

// read fetches the revision, renders the manifests and checks that every
// object belongs to recond's namespace. Nothing is decided about the cluster
// here except each kind's scope. A revision is rendered once: while it does
// not move, later ticks reuse its decorated desired set.
//
// A render of a revision that the followed ref no longer names (a push
// arrived while it ran) is stopped, and the tick goes on with the newer
// revision: a render that never ends cannot hold back its own fix for
// longer than it takes to notice the push.
func (t *tick) read(ctx context.Context) error {
	r, st := t.r, t.st
	for {
		fctx, span := startSpan(ctx, "recond.git.fetch", attribute.String("recond.source", r.src.DisplayURL()))
		rev, err := t.fetch(fctx)
		span.SetAttributes(attribute.String("recond.revision", rev.SHA), attribute.Bool("recond.fetched", rev.Fetched))
		endSpan(span, err)
		if err != nil {
			return err
		}
		st.Revision, st.Fetched = rev.SHA, st.Fetched || rev.Fetched
		if err := t.failedBefore(rev.SHA); err != nil {
			// The revision failed to render, and nothing that could
			// change that changed: its failure is the tick's, without
			// rendering it again.
			trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.render.cached", true), attribute.Bool("recond.render.failed_before", true))
			return err
		}
		if c, ok := r.mem.renderOf(rev.SHA); ok && !t.keysChanged(rev.SHA) {
			// The revision did not move: its render is reused, rendering being a
			// function of the commit alone. Only the kinds' scope, which the
			// server decides, is checked again.
			trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.render.cached", true))
			if err := t.checkScopes(c.firsts); err != nil {
				return err
			}
			st.Desired, st.Hooks, st.Chart, st.Generated, st.Ignored = c.desired, c.hooks, c.chart, c.once, c.ignored
			st.sensitive = c.sensitive
			st.Counts.GeneratedOnce = len(c.once)
			st.Counts.Desired = len(st.Desired)
			return nil
		}
		trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.render.cached", false))
		manifests, err := t.render(ctx, rev)
		if errors.Is(err, errSuperseded) && ctx.Err() == nil {
			st.Superseded++
			r.log.Info("render stopped: the followed ref moved while it ran; reading the newer revision",
				"revision", shortSHA(rev.SHA), "superseded", st.Superseded)
			continue
		}
		// The render's own failure only: the checks after it are cheap,
		// and the server's answers (a kind's scope) may change.
		t.keepFailure(ctx, rev.SHA, err)
		if err != nil {
			return err
		}
		if c, ok := r.src.(charter); ok {
			st.Chart = c.Chart(rev.SHA)
		}
		return t.decorateAll(manifests)
	}
}

// errSuperseded is the cause a render's context carries when the followed
// ref moved while it ran.
var errSuperseded = errors.New("the followed ref moved: a newer revision replaces this one")

// render renders rev in its own span. While it runs, a request for a tick
// (a push webhook, recond sync) and every pollEvery ask the source whether
// the ref still names rev; when it does not, the render is stopped
// (errSuperseded).
func (t *tick) render(ctx context.Context, rev source.Revision) ([]source.Manifest, error) {
	r := t.r
	rctx, span := startSpan(ctx, "recond.render", attribute.String("recond.path", r.cfg.Path))
	wctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	if m, ok := r.src.(mover); ok {
		go t.watchRef(wctx, cancel, m, rev)
	}
	manifests, err := r.src.Render(wctx, rev.SHA)
	if err != nil && errors.Is(context.Cause(wctx), errSuperseded) && rctx.Err() == nil {
		err = fmt.Errorf("%w: %w", errSuperseded, err)
		span.AddEvent("recond.render.superseded")
	}
	span.SetAttributes(attribute.Int("recond.objects.count", len(manifests)))
	endSpan(span, err)
	if errors.Is(err, source.ErrRenderKilled) && errors.Is(err, context.DeadlineExceeded) {
		// The render outlived its tick: its worker was killed, which is
		// what abandoning a phase would have done (recond_loop_stalls_total).
		return nil, fmt.Errorf("%w: %w", errAbandoned, err)
	}
	return manifests, err
}

// charter is a Source that renders Helm charts and tells which chart a
// revision was (source.Source.Chart).
type charter interface {
	Chart(sha string) *source.Chart
}

// mover is a Source that can tell, without fetching, whether the followed
// ref moved away from a revision (source.Source.Moved).
type mover interface {
	Moved(ctx context.Context, rev source.Revision) (bool, error)
}

// watchRef cancels ctx with errSuperseded once m says the ref moved away
// from rev. It asks on every request for a tick and every pollEvery, and
// returns when ctx is done. A failed question is not an answer: the render
// goes on.
func (t *tick) watchRef(ctx context.Context, cancel context.CancelCauseFunc, m mover, rev source.Revision) {
	r := t.r
	var poll <-chan time.Time
	if d := r.ticks.PollInterval(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ticks.NewerRequested():
		case <-poll:
		}
		moved, err := m.Moved(ctx, rev)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Debug("could not tell whether the followed ref moved during the render", "err", err)
			}
			continue
		}
		if moved {
			cancel(errSuperseded)
			return
		}
	}
}

// decorateAll checks every rendered object (its name, scope, namespace and
// uniqueness), decorates it and keeps the render for the next ticks at the
// same revision.
func (t *tick) decorateAll(manifests []source.Manifest) error {
	r, st := t.r, t.st
	// What the revision decrypted is masked, and so is what the previous
	// one did: a live object may still hold it.
	var values []string
	if s, ok := r.src.(sensitiveSource); ok {
		values = s.SensitiveValues(st.Revision)
	}
	prev := r.mem.previousValues(st.Revision)
	sensitive := redact.New(values)
	// Names are checked for the values of 8 characters or more: a shorter
	// one (a user name "shop") may well be part of a name by chance.
	var long []string
	for _, v := range values {
		if len(v) >= decorate.MinNameSecret {
			long = append(long, v)
		}
	}
	if err := decorateEach(r, st, manifests, long); err != nil {
		// No error of the checks quotes a decrypted value.
		return sensitive.Error(err)
	}
	st.sensitive = redact.New(values, prev)
	t.concealErrors(st.sensitive)
	decorate.Masked(st.sensitive, withHooks(st.Desired, st.Hooks))
	// Only a render that passed every check is kept; the phases after read
	// never modify a desired object, so the next tick at this revision can
	// hand out the same ones.
	r.mem.keepRender(renderCache{sha: st.Revision, desired: st.Desired, firsts: decorate.FirstOfEachKind(st.Desired), hooks: st.Hooks, chart: st.Chart, once: st.Generated,
		ignored: st.Ignored, values: values, prev: prev, sensitive: st.sensitive})
	return nil
}

// decorateEach checks and decorates every rendered object into st.
func decorateEach(r *Reconciler, st *State, manifests []source.Manifest, sensitive []string) error {
	sourceAnn := r.src.DisplayURL() + "#" + r.cfg.Path
	seen := map[string]string{} // group/kind/name -> file
	desired := make([]*unstructured.Unstructured, 0, len(manifests))
	var hooks []*hook.Hook
	var once map[string][][]string
	ignored := map[string][]string{}
	for _, m := range manifests {
		obj := m.Object
		if err := decorate.Identity(m.File, obj, sensitive); err != nil {
			return err
		}
		gvk := obj.GroupVersionKind()
		id := fmt.Sprintf("%s/%s", gvk.Kind, obj.GetName())
		if p := r.policy().Reserved(obj.GetName()); p != "" {
			return Invalidf("%s: %s: the name is recond's own: %s; rename the object", m.File, id, decorate.ReservedFor(p, obj.GetName()))
		}
		mapping, err := r.kube.Mapping(gvk)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", m.File, id, err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return Invalidf("%s: %s: %s is cluster-scoped; recond manages only namespace %q", m.File, id, gvk.Kind, r.cfg.Namespace)
		}
		switch ns := obj.GetNamespace(); ns {
		case "":
			obj.SetNamespace(r.cfg.Namespace)
		case r.cfg.Namespace:
		default:
			return Invalidf("%s: %s: namespace %q is not recond's namespace %q", m.File, id, ns, r.cfg.Namespace)
		}
		key := gvk.GroupKind().String() + "/" + obj.GetName()
		if first, dup := seen[key]; dup {
			return Invalidf("%s: %s: duplicate object (first defined in %s)", m.File, id, first)
		}
		seen[key] = m.File
		if m.Hook {
			decorate.Hook(obj, r.cfg.Name, st.Revision, sourceAnn)
			hooks = append(hooks, hook.New(obj))
			continue
		}
		decorate.Object(obj, r.cfg.Name, st.Revision, sourceAnn)
		ptrs, err := optout.Check(obj)
		if err != nil {
			return Invalidf("%s: %s: %v", m.File, id, err)
		}
		if len(ptrs) > 0 {
			ignored[objectKey(obj)] = ptrs
		}
		desired = append(desired, obj)
		if len(m.Generated) > 0 {
			if once == nil {
				once = map[string][][]string{}
			}
			once[objectKey(obj)] = m.Generated
		}
	}
	if err := r.cfg.checkHookBudget(hooks); err != nil {
		return err
	}
	st.Desired, st.Hooks, st.Generated, st.Ignored = desired, hooks, once, ignored
	st.Counts.Desired, st.Counts.GeneratedOnce = len(desired), len(once)
	return nil
}

// sensitiveSource is a Source that decrypts (source.Source): it tells the
// values a revision decrypted that are secret, and whether its keys
// changed since it rendered one.
type sensitiveSource interface {
	SensitiveValues(sha string) []string
	KeysChanged(sha string) bool
}

// keysChanged reports whether a manual tick (recond trigger, recond sync)
// finds the source's decryption keys changed since it rendered sha: the
// revision is then rendered again, with them.
func (t *tick) keysChanged(sha string) bool {
	s, ok := t.r.src.(sensitiveSource)
	return ok && t.st.trigger == TriggerManual && s.KeysChanged(sha)
}

// concealErrors makes the API server's messages about objects that hold a
// decrypted value concealed like a Secret's (cluster.ConcealErrorsOf).
func (t *tick) concealErrors(s *redact.Set) {
	if s == nil {
		t.r.kube.ConcealErrorsOf(nil)
		return
	}
	t.r.kube.ConcealErrorsOf(concealed{s})
}

// concealed is a value set as the cluster client asks for it.
type concealed struct{ s *redact.Set }

func (c concealed) Holds(u *unstructured.Unstructured) bool { return c.s.In(u.Object) }
func (c concealed) Redact(text string) string               { return c.s.Redact(text) }

// Secrets is the set of values the last revision rendered (and the one
// before it) decrypted, for the outputs that pass what they show through
// it (client-go's log records); nil before a render, or when none was
// decrypted.
func (r *Reconciler) Secrets() *redact.Set { return r.mem.secrets() }

// renderFailure is the last render that failed for a reason of the
// revision itself (an invalid manifest or chart, a SOPS file no key
// opens): rendering it again gives the same failure, at a render's cost,
// at every interval.
type renderFailure struct {
	sha  string
	keys [32]byte
	err  error
}

// keysSource is a Source that tells what its decryption keys are now (a
// fingerprint of the keys file, source.Source.KeysFingerprint).
type keysSource interface {
	KeysFingerprint() [32]byte
}

// keysOf is src's keys fingerprint; zero for a source without keys.
func keysOf(src Source) [32]byte {
	if k, ok := src.(keysSource); ok {
		return k.KeysFingerprint()
	}
	return [32]byte{}
}

// keepFailure remembers the outcome of a render of sha: that it failed
// with err, when err (non-nil) is a failure of the revision (reason
// invalid, or auth: no key opens a SOPS file) and not of the tick (a
// timeout, a stop, the worker, the network); else nothing, the last
// render of sha being no longer known to fail.
func (t *tick) keepFailure(ctx context.Context, sha string, err error) {
	var f *renderFailure
	if err != nil && ctx.Err() == nil {
		switch Classify(err) {
		case ReasonInvalid, ReasonAuth:
			f = &renderFailure{sha: sha, keys: keysOf(t.r.src), err: err}
		}
	}
	t.r.mem.keepFailure(sha, f)
}

// failedBefore is the failure the last render of sha had, when it is to
// be the tick's without rendering again: not on a tick someone asked for
// (recond trigger, recond sync, a push webhook: the operator may have
// fixed what the render read outside Git), and not once the decryption
// keys changed (the keys Secret was updated). Nil otherwise.
func (t *tick) failedBefore(sha string) error {
	f := t.r.mem.failure()
	if f == nil || f.sha != sha || t.st.trigger == TriggerManual || t.st.trigger == TriggerWebhook || f.keys != keysOf(t.r.src) {
		return nil
	}
	t.r.log.Debug("render skipped: the revision failed to render before; it is rendered again on a manual tick or once the decryption keys change",
		"revision", shortSHA(sha))
	return f.err
}

// checkScopes checks that every kind of a reused render is still
// namespace-scoped (a CRD can be replaced by a cluster-scoped one): firsts
// holds the first object of each kind, so that it costs a lookup per kind.
func (t *tick) checkScopes(firsts []*unstructured.Unstructured) error {
	r := t.r
	for _, d := range firsts {
		gvk := d.GroupVersionKind()
		mapping, err := r.kube.Mapping(gvk)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", gvk.Kind, d.GetName(), err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return Invalidf("%s/%s: %s is cluster-scoped; recond manages only namespace %q", gvk.Kind, d.GetName(), gvk.Kind, r.cfg.Namespace)
		}
	}
	return nil
}

// withHooks is desired and the hooks' objects.
func withHooks(desired []*unstructured.Unstructured, hooks []*hook.Hook) []*unstructured.Unstructured {
	objs := slices.Clone(desired)
	for _, h := range hooks {
		objs = append(objs, h.Object)
	}
	return objs
}
