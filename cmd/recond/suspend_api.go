package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
)

// suspendRequest is the body of POST /api/v1/suspend.
type suspendRequest struct {
	// Reason is required: it is what whoever wonders why the loop does not
	// write reads.
	Reason string `json:"reason"`
	// By is who suspends.
	By string `json:"by,omitempty"`
	// For is how long (a Go duration, "2h"); "" means --suspend-max.
	For string `json:"for,omitempty"`
}

// resumeRequest is the body of POST /api/v1/resume.
type resumeRequest struct {
	By string `json:"by,omitempty"`
}

// suspendAnswer is the JSON of a 200 from POST /api/v1/suspend and
// /api/v1/resume: the suspension now (none after a resume), and the tick
// that will show it.
type suspendAnswer struct {
	Suspended  bool                  `json:"suspended"`
	Suspension *reconcile.Suspension `json:"suspension,omitempty"`
	// WritesAfterRequest is how many writes the running tick made after
	// the suspend request (in flight when it came); the answer comes once
	// they returned, and nothing is written after it.
	WritesAfterRequest *int64 `json:"writesAfterRequest,omitempty"`
	Tick               uint64 `json:"tick"`
	Status             string `json:"status"`
}

// maxSuspendBody bounds the body of a suspend or resume request.
const maxSuspendBody = 8 << 10

// suspendAPI serves POST /api/v1/suspend and /api/v1/resume with the sync
// token. Any process of the instance serves them, a standby too: the
// suspension is written on the inventory ConfigMap, where the leader reads
// it before it writes.
type suspendAPI struct {
	auth *syncAPI
	rec  *reconcile.Reconciler
}

func (s *suspendAPI) handler(resume bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.authorized(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="recond"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required (--sync-token-file)"})
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxSuspendBody+1))
		if err != nil || len(body) > maxSuspendBody {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("a JSON body of at most %d bytes", maxSuspendBody)})
			return
		}
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var ans suspendAnswer
		if resume {
			var req resumeRequest
			if err := dec.Decode(&req); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
				return
			}
			if err := s.rec.Resume(r.Context(), req.By); err != nil {
				s.fail(w, err)
				return
			}
		} else {
			var req suspendRequest
			if err := dec.Decode(&req); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
				return
			}
			var d time.Duration
			if req.For != "" {
				if d, err = time.ParseDuration(req.For); err != nil {
					writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("for: %q is not a duration (2h, 30m)", req.For)})
					return
				}
				// Named, it is one: "0s" is not "--suspend-max".
				if err := reconcile.CheckSuspendFor(d); err != nil {
					writeJSON(w, http.StatusBadRequest, map[string]string{"error": "for: " + err.Error()})
					return
				}
			}
			sus, err := s.rec.Suspend(r.Context(), req.By, req.Reason, d)
			if err != nil {
				s.fail(w, err)
				return
			}
			ans.Suspended, ans.Suspension, ans.WritesAfterRequest = true, sus.Suspension, &sus.WritesAfterRequest
		}
		// A tick now shows it (the page, the metrics, the Event).
		ans.Tick = s.rec.Request(reconcile.TriggerManual, trace.SpanContextFromContext(r.Context()))
		ans.Status = fmt.Sprintf("/api/v1/ticks/%d", ans.Tick)
		writeJSON(w, http.StatusOK, ans)
	})
}

func (s *suspendAPI) fail(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	if errors.Is(err, reconcile.ErrSuspend) {
		code = http.StatusBadRequest
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
