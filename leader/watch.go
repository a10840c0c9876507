package leader

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// watch follows the Lease (a LIST and a WATCH with its name as field
// selector, which RBAC authorises by resourceNames) until ctx is done, so
// that a Lease deleted or taken under this process stops its writes at
// once rather than at the next renewal. What the watch shows is checked
// with a fresh read before it ends a leadership (verify). A watch the
// Role does not allow is reported and retried every retry period; the
// election's own reads still see a takeover within a retry period.
func (e *Elector) watch(ctx context.Context) {
	sel := fields.OneTermEqualSelector("metadata.name", e.cfg.Lease).String()
	pause := func() bool {
		t := time.NewTimer(e.cfg.RetryPeriod)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		list, err := e.leases().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() == nil {
				e.failed(opWatch, err)
			}
			if !pause() {
				return
			}
			continue
		}
		var cur *coordv1.Lease
		if len(list.Items) > 0 {
			cur = &list.Items[0]
		}
		e.watched(ctx, cur)
		w, err := e.leases().Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				e.failed(opWatch, err)
			}
			if !pause() {
				return
			}
			continue
		}
		e.succeeded(opWatch)
		started := time.Now()
		e.follow(ctx, w)
		w.Stop()
		// A watch that ends at once, again and again, is not a busy loop.
		if time.Since(started) < e.cfg.RetryPeriod && !pause() {
			return
		}
	}
}

// follow hands the watch's events to watched until it ends.
func (e *Elector) follow(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordv1.Lease); ok {
					e.watched(ctx, l)
				}
			case watch.Deleted:
				e.watched(ctx, nil)
			case watch.Error:
				return // relist
			}
		}
	}
}

// watched takes what the watch showed: the Lease, or nil when it is gone.
func (e *Elector) watched(ctx context.Context, lease *coordv1.Lease) {
	if e.alarming(lease) {
		e.verify(ctx)
	}
}
