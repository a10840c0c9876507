package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/writerule"
)

// The engine's side of a chart's hooks (their rules are in
// reconcile/hook): the apply phase starts them, waits for them and deletes
// them, through the write gate, and records their run in the inventory.

// DefaultHookTimeout is how long a hook may run before it counts as
// failed (--helm-hook-timeout's default).
const DefaultHookTimeout = hook.DefaultTimeout

// HookPoll is how soon the loop comes back to a hook that is still
// running.
const HookPoll = hook.Poll

// The default bounds of a revision's hooks (--helm-hook-max,
// --helm-hook-max-bytes; hook.CheckBudget).
const (
	DefaultHookMax      = hook.DefaultMax
	DefaultHookMaxBytes = hook.DefaultMaxBytes
)

// HookPlan is what one hook of a revision would do (hook.Plan).
type HookPlan = hook.Plan

// HookError is a hook that failed or ran out of time: the apply phase
// fails with reason hook, and nothing of the revision's main wave is
// written after a failed pre-hook.
type HookError struct {
	// Hook is "Kind/name", Event what it ran for ("pre-upgrade").
	Hook, Event string
	Err         error
}

func (e *HookError) Error() string {
	if e.Hook == "" {
		return fmt.Sprintf("%s hook: %v", e.Event, e.Err)
	}
	return fmt.Sprintf("%s hook %s: %v", e.Event, e.Hook, e.Err)
}
func (e *HookError) Unwrap() error { return e.Err }

// hookFailure is a hook's own failure (its Job failed, it ran out of
// time), as opposed to a request about it that failed: Classify reports
// the first as reason hook, the second by its own reason.
type hookFailure struct{ msg string }

func (e *hookFailure) Error() string { return e.msg }

// checkHookBudget refuses a revision whose hooks pass --helm-hook-max or
// --helm-hook-max-bytes: read fails with reason invalid, before anything
// is written.
func (c Config) checkHookBudget(hooks []*hook.Hook) error {
	if err := hook.CheckBudget(hooks, c.HookMax, c.HookMaxBytes); err != nil {
		return Invalid(err)
	}
	return nil
}

// hookRunner runs the hooks of the revision a tick's State holds.
type hookRunner struct {
	r  *Reconciler
	st *State
}

// save writes the inventory with hs as its hook state (a copy of the last
// one written, so that the copy in memory is never changed in place).
func (h hookRunner) save(ctx context.Context, hs *hook.State) error {
	n := h.st.inv.Copy()
	n.Hooks = hs.Clone()
	if err := (inventoryStore{h.r}).save(ctx, n); err != nil {
		return err
	}
	h.st.inv = n
	return nil
}

// run runs the hooks of phase (pre or post) of the revision st holds, as
// far as they go this tick: it starts a weight's hooks once the lower
// weights succeeded, and checks the started ones. It reports whether every
// hook of the phase succeeded. Hooks still running are named in
// st.HooksWaiting (the loop comes back after HookPoll); a failed one is a
// *HookError. The state is saved in the inventory once per weight and
// step (after the weight's hooks were started, after they were checked),
// never once per hook: a revision's hooks cost a bounded number of
// inventory writes, whatever their number.
func (h hookRunner) run(ctx context.Context, hs *hook.State, phase string) (bool, error) {
	r, st := h.r, h.st
	event := phase + "-" + hs.Event
	list := hook.Of(st.Hooks, event)
	timeout := r.cfg.HookTimeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	// Before any hook of the phase starts, every one not started yet is
	// judged by the write gate's rules: all the refusals are named at once,
	// and none of the phase's hooks runs.
	var refusals []error
	for _, p := range h.plan(ctx, hs.Pending(list)) {
		if p.Err != nil {
			refusals = append(refusals, &HookError{Hook: p.Hook, Event: event, Err: p.Err})
		}
	}
	if len(refusals) > 0 {
		return false, rejected(fmt.Sprintf("%d of the revision's %s hooks refused (nothing of the phase started)", len(refusals), event), refusals)
	}
	for _, group := range hook.Weights(list) {
		// Start the weight's hooks not started yet, then record them once.
		started := 0
		var startErr error
		for _, k := range hs.Pending(group) {
			if err := st.stopped(); err != nil {
				startErr = err
				break
			}
			if err := h.start(ctx, k, hs, event); err != nil {
				startErr = err
				break
			}
			started++
		}
		if started > 0 {
			if err := h.save(ctx, hs); err != nil {
				return false, err
			}
		}
		if startErr != nil {
			return false, startErr
		}
		// Check them all, then record what changed once.
		running := false
		var succeeded []*hook.Hook
		var lives []*unstructured.Unstructured
		var failed *HookError
		var failedHook *hook.Hook
		var failedLive *unstructured.Unstructured
		for _, k := range group {
			key := k.Key()
			if slices.Contains(hs.Done, key) {
				continue
			}
			live, err := r.kube.Get(ctx, k.Object.GroupVersionKind(), k.Object.GetName())
			if err != nil {
				return false, err
			}
			status, why := hook.Status(live)
			if status == health.InProgress && time.Since(hs.Started[key]) > timeout {
				status, why = health.Failed, fmt.Sprintf("still running after %s (--helm-hook-timeout)", timeout)
			}
			switch status {
			case health.Current:
				hs.Done = append(hs.Done, key)
				succeeded, lives = append(succeeded, k), append(lives, live)
				r.log.InfoContext(ctx, "hook succeeded", "hook", key, "event", event, "revision", shortSHA(hs.Revision))
			case health.Failed:
				if failed == nil {
					failed = &HookError{Hook: key, Event: event, Err: &hookFailure{why}}
					failedHook, failedLive = k, live
				}
			default:
				running = true
				st.HooksWaiting = append(st.HooksWaiting, key)
			}
		}
		if failed != nil {
			hs.Fail(failed, phase)
		}
		if len(succeeded) > 0 || failed != nil {
			// Recorded before their objects are deleted: a stop in between
			// leaves a hook done, not one whose object is gone.
			if err := h.save(ctx, hs); err != nil {
				return false, err
			}
		}
		for n, k := range succeeded {
			if k.Has(hook.Succeeded) {
				if err := h.delete(ctx, lives[n]); err != nil {
					return false, err
				}
			}
		}
		if failed != nil {
			if failedHook.Has(hook.Failed) && failedLive != nil {
				if err := h.delete(ctx, failedLive); err != nil {
					return false, err
				}
			}
			return false, failed
		}
		if running {
			r.TriggerAfter(TriggerHook, HookPoll)
			return false, nil
		}
	}
	return true, nil
}

// delete deletes a hook's live object (its delete policies), through the
// write gate: only a hook of this instance is ever deleted.
func (h hookRunner) delete(ctx context.Context, live *unstructured.Unstructured) error {
	return h.r.kube.Delete(ctx, cluster.Write{Purpose: cluster.PurposeHook, Live: live})
}

// start creates hook k: with before-hook-creation (the default), the
// object a previous run left is deleted first. Both go through the write
// gate as a hook's writes: an object that is not this instance's hook (an
// owned object, another instance's, one made by hand, one marked
// recond.dev/reconcile: disabled, a claim) is never replaced: the hook
// fails with reason invalid, naming it.
func (h hookRunner) start(ctx context.Context, k *hook.Hook, hs *hook.State, event string) error {
	r := h.r
	key := k.Key()
	hctx, span := startSpan(ctx, "recond.hook", kindAttr(k.Object.GetKind()), attribute.String("k8s.name", k.Object.GetName()), attribute.String("recond.hook.event", event))
	err := func() error {
		old, err := r.kube.Get(hctx, k.Object.GroupVersionKind(), k.Object.GetName())
		if err != nil {
			return err
		}
		if old != nil && k.Has(hook.BeforeCreation) {
			if err := r.kube.Delete(hctx, cluster.Write{Purpose: cluster.PurposeHook, Live: old}); err != nil {
				return err
			}
			if err := h.waitGone(hctx, k); err != nil {
				return err
			}
			old = nil
		}
		_, err = r.kube.ApplyFor(hctx, cluster.Write{Purpose: cluster.PurposeHook, Object: k.Object}, old)
		return err
	}()
	endSpan(span, err)
	if err != nil {
		return &HookError{Hook: key, Event: event, Err: err}
	}
	hs.Started[key] = time.Now().UTC().Truncate(time.Second)
	r.log.InfoContext(ctx, "hook started", "hook", key, "event", event, "revision", shortSHA(hs.Revision))
	return nil
}

// waitGone waits until k's object no longer exists (a deletion a finalizer
// holds ends within the tick, or the tick's deadline does).
func (h hookRunner) waitGone(ctx context.Context, k *hook.Hook) error {
	for {
		live, err := h.r.kube.Get(ctx, k.Object.GroupVersionKind(), k.Object.GetName())
		if err != nil || live == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the previous %s is still being deleted: %w", k.Key(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// before runs what must run before the revision's main wave: it starts
// the revision's hook run (the first time apply sees a revision with
// hooks) and its pre-hooks. It reports whether the main wave may be
// written.
func (h hookRunner) before(ctx context.Context) (bool, error) {
	r, st := h.r, h.st
	if len(st.Hooks) == 0 || r.cfg.DryRun {
		return true, nil
	}
	hs := st.inv.Hooks.Clone()
	if hs == nil || hs.Revision != st.Revision {
		hs = hook.Begin(st.Revision, st.inv.Revision)
		r.mem.setHealthy("")
		h.logged(ctx)
		if err := h.save(ctx, hs); err != nil {
			return false, err
		}
	}
	switch hs.Phase {
	case hook.PhaseFailed:
		if hs.FailedIn == hook.PhasePost {
			// The revision was applied in full: it is held (after reports
			// the failure).
			return true, nil
		}
		return false, &HookError{Event: hs.Event, Err: &hookFailure{hs.Failed + " (hooks run once per revision: push a new revision)"}}
	case hook.PhasePre:
		ok, err := h.run(ctx, hs, hook.PhasePre)
		if !ok || err != nil {
			return false, err
		}
		hs.Enter(hook.PhaseMain)
		if err := h.save(ctx, hs); err != nil {
			return false, err
		}
	}
	return true, nil
}

// after runs the revision's post-hooks once it was applied in full and a
// tick found it healthy.
func (h hookRunner) after(ctx context.Context) error {
	r, st := h.r, h.st
	hs := st.inv.Hooks.Clone()
	if len(st.Hooks) == 0 || r.cfg.DryRun || hs == nil || hs.Revision != st.Revision || st.inv.Revision != st.Revision {
		return nil
	}
	if hs.Phase == hook.PhaseMain {
		if r.mem.healthyRevision() != st.Revision {
			return nil
		}
		hs.Enter(hook.PhasePost)
	}
	if hs.Phase == hook.PhaseFailed && hs.FailedIn == hook.PhasePost {
		return &HookError{Event: hs.Event, Err: &hookFailure{hs.Failed + " (hooks run once per revision: push a new revision)"}}
	}
	if hs.Phase != hook.PhasePost {
		return nil
	}
	ok, err := h.run(ctx, hs, hook.PhasePost)
	if !ok || err != nil {
		return err
	}
	hs.Enter(hook.PhaseDone)
	return h.save(ctx, hs)
}

// logged says once per revision which hooks it will run.
func (h hookRunner) logged(ctx context.Context) {
	keys := make([]string, 0, len(h.st.Hooks))
	for _, k := range h.st.Hooks {
		keys = append(keys, k.Key()+" ("+strings.Join(k.Events, ",")+")")
	}
	h.r.log.InfoContext(ctx, "revision has hooks", "revision", shortSHA(h.st.Revision), "hooks", keys)
}

// plan says what each of hooks would do, by the write gate's own rules
// (writerule.Check) over the object each would create and the one it
// would replace: nothing is written.
func (h hookRunner) plan(ctx context.Context, hooks []*hook.Hook) []HookPlan {
	check := func(w cluster.Write) error { return writerule.Check(h.r.policy(), w) }
	out := make([]HookPlan, 0, len(hooks))
	for _, k := range hooks {
		live, err := h.r.kube.Get(ctx, k.Object.GroupVersionKind(), k.Object.GetName())
		out = append(out, hook.PlanOf(k, live, err, check))
	}
	return out
}
