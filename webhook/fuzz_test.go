package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/time/rate"
)

// The seed corpora live in testdata/fuzz/<target>/; the documented bodies of
// testdata/cases.json are added here as well.

// FuzzParse feeds any provider, event name and payload to the parser: it
// never panics, is deterministic, and a push it accepts names each ref once,
// never empty.
func FuzzParse(f *testing.F) {
	for _, c := range loadCases(f) {
		hd := detect(c.header(testSecret, nil))
		f.Add(hd.provider, hd.event, c.body(f))
	}
	f.Fuzz(func(t *testing.T, provider, name string, payload []byte) {
		ev, err := parse(provider, name, payload)
		again, err2 := parse(provider, name, payload)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(ev, again) {
			t.Fatalf("parse is not deterministic: %+v %v, then %+v %v", ev, err, again, err2)
		}
		if err != nil {
			if ev.kind != kindOther || ev.refs != nil {
				t.Fatalf("error %v with an event %+v", err, ev)
			}
			return
		}
		if !json.Valid(payload) {
			t.Fatalf("payload %q is not JSON, but parse accepted it", payload)
		}
		for i, r := range ev.refs {
			if r == "" || slices.Contains(ev.refs[:i], r) {
				t.Fatalf("refs %q: empty or repeated", ev.refs)
			}
		}
		if ev.kind != kindPush && len(ev.refs) > 0 {
			t.Fatalf("event of kind %d names refs %q", ev.kind, ev.refs)
		}
	})
}

// FuzzVerify feeds any proof and body to each scheme: it never panics, and
// it accepts a proof only when it is the right one for the secret.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	mac := hmacHex(testSecret, body)
	f.Add(uint8(schemePrefixed), "sha256="+mac, body)
	f.Add(uint8(schemePrefixed), "sha256="+strings.ToUpper(mac), body)
	f.Add(uint8(schemeHex), mac, body)
	f.Add(uint8(schemeToken), string(testSecret), body)
	f.Add(uint8(schemePrefixed), "sha1="+mac[:40], body)
	f.Add(uint8(schemeHex), mac+"00", body)
	f.Add(uint8(schemeNone), "", []byte(nil))
	v := newVerifier(testSecret)
	f.Fuzz(func(t *testing.T, s uint8, proof string, body []byte) {
		sch := scheme(s % 4)
		if !v.verify(sch, proof, body) {
			return
		}
		want := hmacHex(testSecret, body)
		var right bool
		switch sch {
		case schemePrefixed:
			right = strings.HasPrefix(proof, "sha256=") && strings.EqualFold(proof[len("sha256="):], want)
		case schemeHex:
			right = strings.EqualFold(proof, want)
		case schemeToken:
			right = proof == string(testSecret)
		}
		if !right {
			t.Fatalf("scheme %d accepted proof %q for body %q", sch, proof, body)
		}
	})
}

// FuzzServe sends any body, correctly signed, with any event name and
// content type through the whole handler: it never panics, answers one of
// the documented statuses with a JSON Answer from Results, and never echoes
// the secret.
func FuzzServe(f *testing.F) {
	for _, c := range loadCases(f) {
		hd := detect(c.header(testSecret, nil))
		f.Add(uint8(slices.Index(Providers, hd.provider)), hd.event, c.Headers["Content-Type"], c.body(f))
	}
	f.Add(uint8(0), "push", "application/x-www-form-urlencoded", []byte("payload=%7B%22ref%22%3A%22refs%2Fheads%2Fmain%22%7D"))
	h, err := New(Config{
		Secret:        testSecret,
		Follows:       func(ref string) bool { return ref == "refs/heads/main" },
		Request:       func(context.Context, string) uint64 { return 1 },
		RatePerClient: rate.Inf,
		MaxBody:       64 << 10,
	})
	if err != nil {
		f.Fatal(err)
	}
	statuses := []int{200, 202, 400, 401, 405, 408, 413, 415, 429}
	f.Fuzz(func(t *testing.T, p uint8, event, contentType string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/git", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		mac := hmacHex(testSecret, body)
		switch Providers[int(p)%len(Providers)] {
		case GitHub:
			req.Header.Set("X-GitHub-Event", event)
			req.Header.Set("X-Hub-Signature-256", "sha256="+mac)
		case Gitea:
			req.Header.Set("X-Gitea-Event", event)
			req.Header.Set("X-Gitea-Signature", mac)
		case GitLab:
			req.Header.Set("X-Gitlab-Event", event)
			req.Header.Set("X-Gitlab-Token", string(testSecret))
		case Bitbucket:
			req.Header.Set("X-Event-Key", event)
			req.Header.Set("X-Hub-Signature", "sha256="+mac)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if !slices.Contains(statuses, w.Code) {
			t.Fatalf("status %d", w.Code)
		}
		var a Answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %q: %v", w.Body.Bytes(), err)
		}
		if !slices.Contains(Results, a.Result) {
			t.Fatalf("result %q not in Results", a.Result)
		}
		if bytes.Contains(w.Body.Bytes(), testSecret) || bytes.Contains(w.Body.Bytes(), []byte(mac)) {
			t.Fatalf("answer %q echoes the secret or the signature", w.Body.Bytes())
		}
	})
}
