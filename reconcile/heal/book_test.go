package heal

import (
	"testing"
	"time"
)

// A change seen by the watch and a later write of the same object is a
// heal, with the latency from the event; a write of an object nobody
// changed is not; a change that no write followed (a status update) is
// forgotten after the tick. A second heal within the fight window is a
// fight: the object backs off, doubling up to the cap, and a quiet period
// forgives.
func TestHealerLatencyAndFights(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := &Book{Now: func() time.Time { return now }}
	write := []Write{{Kind: "Deployment", Name: "web"}}

	h.Changed("Deployment/web", now.Add(-300*time.Millisecond))
	h.Changed("Deployment/web", now.Add(-100*time.Millisecond)) // the first change counts
	h.Changed("ConfigMap/status-only", now.Add(-200*time.Millisecond))
	heals := h.Healed(now.Add(-50*time.Millisecond), append(write, Write{Kind: "Service", Name: "other"}), now)
	if len(heals) != 1 || heals[0].Kind != "Deployment" || heals[0].Latency != 300*time.Millisecond || heals[0].Fight {
		t.Fatalf("heals %+v, want Deployment/web after 300ms, no fight", heals)
	}
	if len(h.seen) != 0 {
		t.Errorf("changes still remembered after the tick: %v", h.seen)
	}
	if _, ok := h.BackingOff("Deployment/web"); ok {
		t.Error("backing off after one heal")
	}

	// The other manager changes it again at once: a fight, backing off
	// 2 s, then 4 s, ... at most 5 min.
	want := InitialBackoff
	for i := range 10 {
		now = now.Add(time.Second)
		h.Changed("Deployment/web", now.Add(-10*time.Millisecond))
		heals = h.Healed(now.Add(-5*time.Millisecond), write, now)
		if len(heals) != 1 || !heals[0].Fight || heals[0].Backoff != want {
			t.Fatalf("round %d: heals %+v, want a fight backing off %s", i, heals, want)
		}
		if until, ok := h.BackingOff("Deployment/web"); !ok || !until.Equal(now.Add(want)) {
			t.Fatalf("round %d: backing off until %v (%t), want %v", i, until, ok, now.Add(want))
		}
		want = min(2*want, MaxBackoff)
	}
	// No write (a failed one is not handed over) is no heal.
	now = now.Add(time.Second)
	h.Changed("Deployment/web", now)
	if heals := h.Healed(now, nil, now); len(heals) != 0 {
		t.Errorf("healed without a write: %+v", heals)
	}
	// After a quiet while (counted from the end of the back-off) the
	// back-off is forgiven.
	now = now.Add(2*MaxBackoff + time.Minute)
	if _, ok := h.BackingOff("Deployment/web"); ok {
		t.Fatal("still backing off after the back-off ended")
	}
	h.Changed("Deployment/web", now.Add(-10*time.Millisecond))
	if heals := h.Healed(now.Add(-5*time.Millisecond), write, now); len(heals) != 1 || heals[0].Fight {
		t.Fatalf("heal after a quiet while: %+v, want no fight", heals)
	}
	now = now.Add(time.Second)
	h.Changed("Deployment/web", now.Add(-10*time.Millisecond))
	if heals := h.Healed(now.Add(-5*time.Millisecond), write, now); len(heals) != 1 || heals[0].Backoff != InitialBackoff {
		t.Fatalf("first fight after forgiveness: %+v, want back-off %s", heals, InitialBackoff)
	}
}
