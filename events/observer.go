package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events"

	"recond.dev/recond/reconcile"
)

// The annotations every Event carries (the trace id only when the tick was
// traced and sampled, the revision when it is known).
const (
	AnnotationRevision = "recond.dev/revision"
	AnnotationInstance = "recond.dev/instance"
	AnnotationTraceID  = "recond.dev/trace-id"
)

// ReportingController is the reportingController of recond's Events.
const ReportingController = "recond.dev/recond"

// reportingInstanceLimit is the API server's limit on reportingInstance.
const reportingInstanceLimit = 128

// DefaultShutdownTimeout bounds Shutdown when its context has no deadline.
const DefaultShutdownTimeout = 5 * time.Second

// The events client's own rate limit (ClientConfig).
const (
	ClientQPS   = 20
	ClientBurst = 100
)

// ClientConfig returns a copy of c for the Events client: a rate limit of
// its own (ClientQPS, ClientBurst), so that a burst of Events never delays a
// tick's requests nor the other way round.
func ClientConfig(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.QPS, c.Burst, c.RateLimiter = ClientQPS, ClientBurst, nil
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.UserAgent += " recond-events"
	return c
}

// Options configure an Observer.
type Options struct {
	// Namespace is the instance's namespace (required): every Event is in it.
	Namespace string
	// Instance is the instance's name, --name (required).
	Instance string
	// ReportingInstance is the Events' reportingInstance: the pod's name;
	// "" means the host name. Cut to the API's 128 bytes.
	ReportingInstance string
	// Log receives the broadcaster's errors (an Event the server refused);
	// nil discards them.
	Log *slog.Logger
	// MaxObjectEvents caps the Events about single objects of one reason
	// per tick (0: DefaultMaxObjectEvents); the rest become one summary on
	// the inventory.
	MaxObjectEvents int
	// Recorded, when set, is told of every Event handed to the recorder (the
	// metrics count them by reason and type).
	Recorded func(reason, typ string)
}

// Observer records the Events of each tick's transitions through
// client-go's events broadcaster. It implements reconcile.Observer.
type Observer struct {
	opts        Options
	transitions Transitions
	broadcaster clientevents.EventBroadcaster
	recorder    clientevents.EventRecorderLogger
	sink        *trackingSink
	stopWatch   func()
	cancel      context.CancelFunc

	// emitted counts the Events handed to the recorder; distributed those
	// the broadcaster passed on to its watchers (which Shutdown waits for).
	emitted, distributed atomic.Int64
	// lastDistributed is when the last Event was distributed (Unix ns).
	lastDistributed atomic.Int64

	mu     sync.Mutex // TickEnd against Shutdown
	closed bool
}

// New starts a broadcaster that records to client's events.k8s.io/v1 API.
// client is the events.k8s.io/v1 client alone (typed/events/v1's
// NewForConfig), not the clientset, which would link every API group's
// client; it should have a rate limit of its own (ClientConfig). Shutdown
// flushes and stops it.
func New(client eventsv1client.EventsV1Interface, o Options) (*Observer, error) {
	if client == nil {
		return nil, errors.New("events: no client")
	}
	if o.Namespace == "" || o.Instance == "" {
		return nil, fmt.Errorf("events: namespace %q and instance %q are both required", o.Namespace, o.Instance)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ReportingInstance == "" {
		o.ReportingInstance, _ = os.Hostname()
		if o.ReportingInstance == "" {
			o.ReportingInstance = "recond-" + o.Instance
		}
	}
	o.ReportingInstance = Truncate(o.ReportingInstance, reportingInstanceLimit)

	sink := &trackingSink{EventSink: &clientevents.EventSinkImpl{Interface: client},
		reportingInstance: o.ReportingInstance, retrying: map[string]time.Time{}}
	b := clientevents.NewBroadcaster(sink)
	// client-go logs through the context's logr: recond's slog.
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.FromSlogHandler(o.Log.Handler())))
	obs := &Observer{opts: o, transitions: Transitions{Max: o.MaxObjectEvents, Instance: o.Instance},
		broadcaster: b, sink: sink, cancel: cancel}
	stop, err := b.StartEventWatcher(func(runtime.Object) {
		obs.lastDistributed.Store(time.Now().UnixNano())
		obs.distributed.Add(1)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("events: watch the broadcaster: %w", err)
	}
	obs.stopWatch = stop
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("events: start recording: %w", err)
	}
	obs.recorder = b.NewRecorder(scheme.Scheme, ReportingController)
	return obs, nil
}

// TickStart implements reconcile.Observer.
func (o *Observer) TickStart(ctx context.Context) context.Context { return ctx }

// PhaseStart implements reconcile.Observer.
func (o *Observer) PhaseStart(ctx context.Context, _ reconcile.Phase) context.Context { return ctx }

// PhaseEnd implements reconcile.Observer.
func (o *Observer) PhaseEnd(context.Context, reconcile.PhaseResult, *reconcile.Result) {}

// TickEnd records the Events of the tick's transitions (none for a tick
// that changed nothing), annotated with the revision, the instance and the
// tick's trace id.
func (o *Observer) TickEnd(ctx context.Context, r *reconcile.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	intents := o.transitions.Next(r)
	if len(intents) == 0 {
		return
	}
	ann := Annotations(ctx, o.opts.Instance, r.Revision)
	rec, annotated := o.recorder.(clientevents.AnnotatedEventRecorder)
	for _, i := range intents {
		ref := &corev1.ObjectReference{APIVersion: i.Regarding.APIVersion, Kind: i.Regarding.Kind,
			Name: i.Regarding.Name, Namespace: o.opts.Namespace, UID: i.Regarding.UID, ResourceVersion: i.Regarding.ResourceVersion}
		o.emitted.Add(1)
		if o.opts.Recorded != nil {
			o.opts.Recorded(i.Reason, i.Type)
		}
		if annotated {
			rec.AnnotatedEventf(ref, nil, maps.Clone(ann), i.Type, i.Reason, i.Action, "%s", i.Note)
		} else {
			o.recorder.Eventf(ref, nil, i.Type, i.Reason, i.Action, "%s", i.Note)
		}
	}
}

// Annotations are the annotations of the Events of one tick: the instance,
// the revision when known, and the trace id when ctx carries a sampled span.
func Annotations(ctx context.Context, instance, revision string) map[string]string {
	ann := map[string]string{AnnotationInstance: instance}
	if revision != "" {
		ann[AnnotationRevision] = revision
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() && sc.HasTraceID() {
		ann[AnnotationTraceID] = sc.TraceID().String()
	}
	return ann
}

// Shutdown waits until the Events recorded so far were sent (within ctx, or
// DefaultShutdownTimeout when ctx has no deadline), then stops the
// broadcaster; later ticks record nothing. It returns an error when it gave
// up waiting. `recond sync` calls it before exiting, or its Events are lost.
func (o *Observer) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultShutdownTimeout)
		defer cancel()
	}
	err := o.flush(ctx)
	o.stopWatch()
	o.broadcaster.Shutdown()
	o.cancel()
	return err
}

// flushQuiet is how long the sink must have been idle, and no Event
// distributed, once every Event reached the broadcaster's watchers, for
// flush to end. The broadcaster
// hands each Event to the sink in a goroutine of its own, and folds an Event
// equal to a recent one into a series it may write only later: no count
// says when it is done, an idle sink does.
const flushQuiet = 150 * time.Millisecond

// flush returns when every Event emitted was distributed and the sink has
// been idle for flushQuiet with no write left to retry, or when ctx is done.
func (o *Observer) flush(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		sinceDistributed := time.Since(time.Unix(0, o.lastDistributed.Load()))
		if o.distributed.Load() >= o.emitted.Load() && min(sinceDistributed, o.sink.idleFor()) >= flushQuiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("events: flush: %d Events not distributed, %d writes in flight or to retry: %w",
				max(0, o.emitted.Load()-o.distributed.Load()), o.sink.busy(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// trackingSink is the broadcaster's sink: it sets recond's
// reportingInstance (the recorder's is "<controller>-<host name>", not
// configurable) and tracks the writes in flight and those the broadcaster
// will retry, for flush.
type trackingSink struct {
	clientevents.EventSink
	reportingInstance string

	mu       sync.Mutex
	inFlight int
	last     time.Time            // when the last write started or ended
	retrying map[string]time.Time // Events (by name) whose last write will be retried, since when
}

// retryFor is how long the broadcaster may go on retrying one Event (12
// tries, about 10 s apart): an Event still failing after it was given up.
const retryFor = 3 * time.Minute

// Create implements clientevents.EventSink.
func (s *trackingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e.ReportingInstance = s.reportingInstance // the broadcaster's own copy
	s.begin()
	out, err := s.EventSink.Create(ctx, e)
	s.end(e.Name, err)
	return out, err
}

// Patch implements clientevents.EventSink.
func (s *trackingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.begin()
	out, err := s.EventSink.Patch(ctx, e, data)
	s.end(e.Name, err)
	return out, err
}

func (s *trackingSink) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight++
	s.last = time.Now()
}

// end records a finished write. The broadcaster retries an error that is
// not the server's answer (a transport error); a NotFound PATCH is followed
// at once by a CREATE.
func (s *trackingSink) end(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	s.last = time.Now()
	var status apierrors.APIStatus
	var construct *rest.RequestConstructionError
	if err != nil && !errors.As(err, &status) && !errors.As(err, &construct) {
		if _, ok := s.retrying[name]; !ok {
			s.retrying[name] = s.last
		}
	} else {
		delete(s.retrying, name)
	}
}

// idleFor is how long no write has been in flight or waiting for a retry.
func (s *trackingSink) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetGivenUp()
	if s.inFlight > 0 || len(s.retrying) > 0 {
		return 0
	}
	return time.Since(s.last)
}

// forgetGivenUp drops the Events the broadcaster has stopped retrying. The
// caller holds s.mu.
func (s *trackingSink) forgetGivenUp() {
	for name, since := range s.retrying {
		if time.Since(since) > retryFor {
			delete(s.retrying, name)
		}
	}
}

func (s *trackingSink) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetGivenUp()
	return s.inFlight + len(s.retrying)
}
