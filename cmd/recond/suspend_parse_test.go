package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile"
)

// TestSuspendLengths runs `recond run` and asks it for suspensions it
// cannot take as given: a length under a second (the end is written to
// the second: "for":"1ns" answered suspended with an end already past),
// through the API and `recond suspend --for` alike, and "--for 0s" (it
// meant --suspend-max): each is refused, saying "at least 1s", and
// nothing is written. Then an end written by hand with a lower-case t and
// z (RFC 3339 allows them) is taken as written, not replaced by
// --suspend-max.
func TestSuspendLengths(t *testing.T) {
	r, ns, url, token := startSuspendable(t)

	for _, d := range []string{"1ns", "999ms", "0s", "-1h"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/suspend", strings.NewReader(`{"reason":"x","for":"`+d+`"}`))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "a duration of at least 1s") {
			t.Errorf(`POST /api/v1/suspend "for":%q: %s %s, want 400 saying "a duration of at least 1s"`, d, resp.Status, body)
		}
	}
	for _, d := range []string{"0s", "0", "500ms"} {
		var stdout, stderr bytes.Buffer
		code := suspendCommand(context.Background(), false, []string{"--url", url, "--token-file", token, "--reason", "x", "--for", d}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--for: ") || !strings.Contains(stderr.String(), "a duration of at least 1s") {
			t.Errorf("recond suspend --for %s: exit %d, %q %q; want 2 saying \"a duration of at least 1s\"", d, code, stdout.String(), stderr.String())
		}
	}
	inv, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "recond-inventory-recond", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{reconcile.AnnotationSuspendedUntil, reconcile.AnnotationSuspendReason} {
		if v, ok := inv.Annotations[a]; ok {
			t.Fatalf("a refused suspension was written: %s=%q", a, v)
		}
	}

	// By hand, in lower case.
	end := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	lower := strings.ToLower(end.Format(time.RFC3339))
	if !strings.Contains(lower, "t") || !strings.HasSuffix(lower, "z") {
		t.Fatalf("fixture: %q", lower)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		reconcile.AnnotationSuspendedUntil: lower, reconcile.AnnotationSuspendReason: "by hand", reconcile.AnnotationSuspendedBy: "carol"}}})
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), "recond-inventory-recond", types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl-annotate"}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/sync", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	waitEvent(t, ns, "Suspended ConfigMap/recond-inventory-recond", r.log)
	for deadline := time.Now().Add(time.Minute); metricLine(t, r.addr, "recond_suspended") != "recond_suspended 1"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not suspended after a minute; log:\n%s", r.log.String())
		}
	}
	l := metricLine(t, r.addr, "recond_suspended_until_timestamp_seconds")
	until, _ := strconv.ParseFloat(strings.TrimPrefix(l, "recond_suspended_until_timestamp_seconds "), 64)
	if got := time.Unix(int64(until), 0); !got.Equal(end) {
		t.Errorf("%q: ends at %s, want %s as written (%q)", l, got.UTC(), end, lower)
	}
	inv, err = cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "recond-inventory-recond", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Annotations[reconcile.AnnotationSuspendedUntil]; got != lower {
		t.Errorf("%s = %q, want %q left as written", reconcile.AnnotationSuspendedUntil, got, lower)
	}
}
