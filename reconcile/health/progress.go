package health

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/revision"
)

// Progress follows each object's health across ticks, by the engine's
// object key: for the progress deadline (an object in progress for longer
// than the timeout counts as failed) and for since when it has had its
// status. It is plain data (no lock); the zero Progress is ready.
type Progress struct {
	m map[string]*progress
}

// Written is what an object's metadata says of recond's last write of it.
type Written struct {
	Revision string    // recond.dev/revision
	Changed  time.Time // recond's Apply entry in managedFields
}

// Pass is what one assessment of every object knows: the time, the
// deadline, the rules, the tick's revision and how to read an object's
// last write. Due is set to the first progress deadline still ahead (zero:
// none), when the assessment may change without any object changing.
type Pass struct {
	Now      time.Time
	Timeout  time.Duration
	Rules    *Rules
	Revision string
	Written  func(*unstructured.Unstructured) Written
	Due      time.Time
}

// Found is one object's health: its assessment after the progress
// deadline, since when it has had that status, and its last write.
type Found struct {
	Assessment
	Since   time.Time
	Written Written
}

type progress struct {
	// raw is the assessment before the progress deadline.
	raw Status
	// status is the object's health at the last assessment (after the
	// progress deadline), since when it has had it.
	status Status
	since  time.Time
	// clock is when the progress deadline started counting: the last write
	// by recond, or the start of the current in-progress stretch, whichever
	// is later.
	clock time.Time
	// revision is the revision of recond's last write of the object ("" when
	// this process has not written it).
	revision string
	// rv is the resourceVersion last assessed, assessed what Assess said
	// of it (before the progress deadline).
	rv       string
	assessed Assessment
	written  Written
}

// Assess is the health of obj (key) at p.Now; wrote is set when recond
// wrote it during this tick (its deadline starts again).
func (g *Progress) Assess(p *Pass, key string, obj *unstructured.Unstructured, wrote bool) Found {
	now := p.Now
	o := g.m[key]
	var a Assessment
	var seen Written
	if rv := obj.GetResourceVersion(); o != nil && rv != "" && rv == o.rv {
		// Unchanged since the last assessment: a converged tick of
		// thousands of objects costs a map lookup each.
		a, seen = o.assessed, o.written
	} else {
		a = Assess(obj, p.Rules)
		seen = p.Written(obj)
	}
	if o == nil {
		o = &progress{raw: a.Status, status: a.Status, since: now, clock: now}
		if a.Status == InProgress {
			// First seen (a new process, a new leader) while in
			// progress: the clock runs from recond's last apply that
			// changed it, as the object records it, not from now.
			if at := seen.Changed; !at.IsZero() && at.Before(now) {
				o.clock, o.revision = at, seen.Revision
			}
		}
		if g.m == nil {
			g.m = map[string]*progress{}
		}
		g.m[key] = o
	}
	o.rv, o.assessed, o.written = obj.GetResourceVersion(), a, seen
	if wrote {
		o.clock, o.revision = now, p.Revision
	} else if a.Status == InProgress && o.raw != InProgress {
		o.clock = now // a new stretch of progress
	}
	o.raw = a.Status
	if a.Status == InProgress && now.Sub(o.clock) > p.Timeout {
		a = Assessment{Status: Failed, Message: o.deadlineMessage(p.Timeout, a.Message)}
	} else if a.Status == InProgress {
		if due := o.clock.Add(p.Timeout); p.Due.IsZero() || due.Before(p.Due) {
			p.Due = due
		}
	}
	if a.Status != o.status {
		o.status, o.since = a.Status, now
	}
	return Found{Assessment: a, Since: o.since, Written: seen}
}

// Forget drops what is remembered of an object (it is missing).
func (g *Progress) Forget(key string) { delete(g.m, key) }

// Keep forgets every object but those of keep (the desired set).
func (g *Progress) Keep(keep map[string]bool) {
	for k := range g.m {
		if !keep[k] {
			delete(g.m, k)
		}
	}
}

// deadlineMessage says why an object is failed: in progress past the
// deadline. It names when the progress began rather than for how long, so
// that it stays the same from tick to tick.
func (o *progress) deadlineMessage(timeout time.Duration, why string) string {
	from := "first seen in progress"
	if o.revision != "" {
		from = "applied at revision " + revision.Abbrev(o.revision, 12)
	}
	msg := fmt.Sprintf("progress deadline: in progress since %s, longer than --health-timeout %s (%s)", o.clock.UTC().Format(time.RFC3339), timeout, from)
	if why != "" {
		msg += ": " + why
	}
	return msg
}
