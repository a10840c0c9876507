package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"recond.dev/recond/internal/testenv/registry"
)

// TestFaultRegistryTagFlapping: the followed tag flaps between two
// artifacts (retagged every 50 ms: two pushers fighting over it, or a
// registry behind replicas that disagree). Each artifact has objects the
// other lacks, so each revision change creates and prunes. recond's own
// prunes are not drift: they ask for no tick and heal nothing, and a
// source that moved is fetched again at the interval, not at every tick a
// watch event asks for. So the loop ticks at its interval (2 s here) and
// applies at most one revision per interval, each tick resolving the tag
// with one HEAD. Before, each prune's watch event asked for a tick that
// resolved the tag again: about ten ticks a second, 257 HEADs and about
// 135 each of Created, Pruned, Updated and RevisionApplied Events in 26 s,
// every tick counting healed=2. Once the tag stays put, the next tick
// converges.
func TestFaultRegistryTagFlapping(t *testing.T) {
	cp.Require(t)
	reg := registry.Start(t, registry.Options{})
	d1 := reg.PushFluxArtifact(t, regRepo, "latest", gitFiles(3, "v1"))
	ns := cp.Namespace(t)
	r, _ := startReg(t, reg.Host, "latest", ns, "--interval", "2s")
	d2 := reg.PushFluxArtifact(t, regRepo, "latest", map[string]string{
		gitManifests + "/cm-01.yaml": gitConfigMap("cm-01", "new"),
		gitManifests + "/cm-09.yaml": gitConfigMap("cm-09", "new"),
	})
	rep := reg.Repository(t, regRepo)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var descs [2]ocispec.Descriptor
	for i, d := range []string{d1, d2} {
		desc, err := rep.Resolve(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		descs[i] = desc
	}

	reg.ResetRequests()
	start := r.LastTick()
	var (
		flapping sync.WaitGroup
		retags   int
	)
	flapping.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if err := rep.Tag(ctx, descs[i%2], "latest"); err != nil && ctx.Err() == nil {
				t.Errorf("retag: %v", err)
				return
			}
			retags++
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	// Flap for six interval ticks, and until one applied a new revision.
	last := start
	for n, moved := 0, false; n < 6 || !moved; {
		last = r.WaitTick(time.Minute, last.ID, func(Tick) bool { return true })
		if last.Trigger == "interval" {
			n++
		}
		moved = moved || last.Num("created") > 0 || last.Num("pruned") > 0
		if n > 30 {
			t.Fatal("no tick applied a new revision in 30 interval ticks: does the tag flap?")
		}
	}
	cancel()
	flapping.Wait()
	stopped := time.Now()
	var ticks, byInterval, healed, applied int
	var others []string
	for _, tk := range r.Ticks() {
		if tk.ID <= start.ID || tk.ID > last.ID {
			continue
		}
		ticks++
		switch {
		case tk.Trigger == "interval":
			byInterval++
		case len(others) < 5:
			others = append(others, tk.String())
		}
		healed += int(tk.Num("healed"))
		if tk.Num("created") > 0 || tk.Num("pruned") > 0 {
			applied++
		}
		// The registry answers a HEAD that meets a retag with a 500 now
		// and then: that tick fails in read, and writes nothing.
		if tk.Failed() && (tk.Phase != "read" || tk.Reason != "unavailable") {
			t.Errorf("%s", tk)
		}
	}
	heads := 0
	for _, req := range reg.Requests() {
		if strings.HasPrefix(req, "HEAD /v2/"+regRepo+"/manifests/latest") {
			heads++
		}
	}
	t.Logf("%d retags: %d ticks (%d by the interval), %d applying a revision, %d heals, %d HEADs of the tag",
		retags, ticks, byInterval, applied, healed, heads)
	// One tick at most beside the interval's: a watch event of another
	// writer's (none here) may ask for one.
	if ticks > byInterval+1 {
		t.Errorf("%d ticks while the tag flapped for %d interval ticks, want %d at most; the first others: %v", ticks, byInterval, byInterval+1, others)
	}
	if healed != 0 {
		t.Errorf("%d heals counted while nothing but recond wrote", healed)
	}
	// Each tick resolves the tag once (a render's check of the ref may ask
	// once more).
	if heads > 2*ticks {
		t.Errorf("%d HEADs of the tag in %d ticks, want %d at most", heads, ticks, 2*ticks)
	}
	// The tick that finds the tag's last digest applies it, the next one
	// converges (one in flight at the stop may have seen the flapping).
	r.Recovery("registry tag flapping", stopped, last.ID, 3, 30*time.Second, Converged)
}
