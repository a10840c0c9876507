package leader_test

import (
	"errors"
	"testing"
	"time"

	"recond.dev/recond/leader"
)

// A claimant renews its claim every third of its term, and that renewal
// is its sign of life. Cut off from the API server (as a process killed
// without releasing the Lease is), it stops writing once two renewals have
// failed, and a process that campaigns with renewals takes the Lease over
// when the claim ends, without anyone deleting it; meanwhile its State
// says that the holder is overdue. Before, a claim was written for a year
// and never renewed: the standby waited for ever.
func TestDeadClaimantIsTakenOverWhenItsClaimEnds(t *testing.T) {
	const name = "recond-leader-dead"
	p := proxiedLease(t, name)
	ns, renewals := p.ns, p.writes
	const claimFor = 3 * time.Second
	timing := quick(ns, name, "")
	timing.ClaimDuration = claimFor
	claim := timing
	claim.Mode, claim.Identity = leader.ModeClaim, "claimant"
	a := elect(t, claim, p.client, nil)
	actx := a.lead(t, 20*time.Second)
	claimed := renewals.Hits()
	if got := *getLease(t, ns, name).Spec.LeaseDurationSeconds; got != int32(claimFor/time.Second) {
		t.Errorf("the claim's term is %ds, want %s", got, claimFor)
	}
	// Two renewals, a third of the claim apart.
	renewals.WaitHits(t, claimed+2, time.Minute)
	if err := a.e.MayWrite(); err != nil {
		t.Fatalf("a renewing claimant may not write: %v", err)
	}

	// Killed: nothing of it reaches the API server any more.
	p.proxy.SetDown(true)
	cut := time.Now()
	lastRenewal := getLease(t, ns, name).Spec.RenewTime.Time

	renew := timing
	renew.Identity = "standby"
	b := elect(t, renew, cp.Client, nil)
	st := b.state(t, "the standby sees the claimant", time.Minute, func(s leader.State) bool { return s.Holder == "claimant" })
	if !st.Renewed.Equal(lastRenewal) || !st.Expires.Equal(lastRenewal.Add(claimFor)) {
		t.Errorf("standby's state renewed %s expires %s, want %s and %s", st.Renewed, st.Expires, lastRenewal, lastRenewal.Add(claimFor))
	}
	if st.Overdue(lastRenewal.Add(claimFor / 3)) {
		t.Error("Overdue a third of a claim after its renewal, when the next one is due")
	}
	if !st.Overdue(lastRenewal.Add(claimFor * 2 / 3)) {
		t.Error("not Overdue two thirds of a claim after its renewal")
	}
	bctx := b.lead(t, time.Minute)
	took := time.Since(cut)
	// The claimant stopped writing before: its last renewal is more than
	// two thirds of a claim old, and the standby took over a whole claim
	// after it last saw the Lease change.
	if err := a.e.MayWrite(); !errors.Is(err, leader.ErrNotWriter) {
		t.Errorf("the cut-off claimant's MayWrite = %v when the standby leads, want ErrNotWriter", err)
	}
	ended(t, "the cut-off claimant", actx, time.Minute)
	if err := returned(t, "the cut-off claimant", a.done, time.Minute); !errors.Is(err, leader.ErrLost) {
		t.Errorf("the cut-off claimant's Run returned %v, want ErrLost", err)
	}
	if bctx.Err() != nil {
		t.Error("the standby stopped leading")
	}
	t.Logf("standby leads %s after the claimant was cut off (claim %s, its last renewal %s before the cut)",
		took.Round(10*time.Millisecond), claimFor, cut.Sub(lastRenewal).Round(10*time.Millisecond))
}

func TestOverdue(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		s     leader.State
		now   time.Time
		wants bool
	}{
		{"unknown", leader.State{Holder: "x"}, at, false},
		{"just renewed", leader.State{Holder: "x", Renewed: at, Expires: at.Add(10 * time.Minute)}, at.Add(time.Minute), false},
		{"half the term", leader.State{Holder: "x", Renewed: at, Expires: at.Add(10 * time.Minute)}, at.Add(5 * time.Minute), false},
		{"past half the term", leader.State{Holder: "x", Renewed: at, Expires: at.Add(10 * time.Minute)}, at.Add(5*time.Minute + time.Second), true},
		{"expired", leader.State{Holder: "x", Renewed: at, Expires: at.Add(15 * time.Second)}, at.Add(time.Minute), true},
		{"no term", leader.State{Holder: "x", Renewed: at, Expires: at}, at.Add(time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Overdue(tt.now); got != tt.wants {
				t.Errorf("Overdue = %v, want %v", got, tt.wants)
			}
		})
	}
}
