package webhook

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// bitbucketServerRefs is a Bitbucket Server repo:refs_changed body naming
// n refs ("refs/tags/0" ...), each of the first dups of them twice.
func bitbucketServerRefs(n, dups int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"eventKey":"repo:refs_changed","changes":[`)
	for i := range n + dups {
		if i > 0 {
			b.WriteByte(',')
		}
		ref := i
		if i >= n {
			ref = i - n
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"refId":"refs/tags/%d"}`, ref)
		} else {
			fmt.Fprintf(&b, `{"ref":{"id":"refs/tags/%d"}}`, ref)
		}
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// A signed Bitbucket Server push of 30,000 refs (a mirror's first push,
// some named twice): each ref is read once, in order, and the followed one,
// named last, asks for a tick. Follows is asked once per distinct ref.
func TestBitbucketServerPushOfManyRefs(t *testing.T) {
	const n, dups = 30000, 2000
	body := bitbucketServerRefs(n, dups)
	if len(body) > DefaultMaxBody {
		t.Fatalf("the body is %d bytes, over the %d a delivery may have", len(body), DefaultMaxBody)
	}
	ev, err := parse(Bitbucket, "repo:refs_changed", body)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.refs) != n {
		t.Fatalf("%d refs, want %d (each once)", len(ev.refs), n)
	}
	for i, r := range ev.refs {
		if want := fmt.Sprintf("refs/tags/%d", i); r != want {
			t.Fatalf("refs[%d] = %q, want %q (in the order first named)", i, r, want)
		}
	}

	var rec recorder
	cfg := rec.config(fmt.Sprintf("refs/tags/%d", n-1))
	var asked atomic.Int64
	follows := cfg.Follows
	cfg.Follows = func(ref string) bool { asked.Add(1); return follows(ref) }
	srv := serve(t, cfg)
	h := http.Header{
		"Content-Type":    {"application/json"},
		"X-Event-Key":     {"repo:refs_changed"},
		"X-Request-Id":    {"many-refs-1"},
		"X-Hub-Signature": {"sha256=" + hmacHex(testSecret, body)},
	}
	status, a, _ := post(t, srv, h, bytes.NewReader(body))
	if status != http.StatusAccepted || a.Result != Accepted {
		t.Fatalf("answer %d %+v, want 202 accepted\n%s", status, a, rec.logText())
	}
	if got := asked.Load(); got != n {
		t.Errorf("Follows asked %d times, want %d (once per distinct ref)", got, n)
	}
	if strings.Count(rec.logText(), "webhook accepted") != 1 || rec.tickCount() != 1 {
		t.Errorf("%d ticks asked for, want 1", rec.tickCount())
	}
}

func TestRefSet(t *testing.T) {
	var s refSet
	for _, r := range []string{"refs/heads/a", "", "refs/heads/b", "refs/heads/a", "refs/tags/a", "refs/heads/b"} {
		s.add(r)
	}
	if got := strings.Join(s.refs, " "); got != "refs/heads/a refs/heads/b refs/tags/a" {
		t.Errorf("refs = %q", got)
	}
}

// BenchmarkBitbucketServerPush parses a push of 30,000 refs: with a
// quadratic dedup it took 1 s of CPU; it is linear now (make bench).
func BenchmarkBitbucketServerPush(b *testing.B) {
	body := bitbucketServerRefs(30000, 2000)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parse(Bitbucket, "repo:refs_changed", body); err != nil {
			b.Fatal(err)
		}
	}
}
