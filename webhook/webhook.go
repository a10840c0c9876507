package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// The results, as they appear in the result label.
const (
	Accepted     = "accepted"     // a push to the followed ref: a tick was asked for
	Ignored      = "ignored"      // authentic, but nothing to do (ping, other ref, other event)
	Replayed     = "replayed"     // authentic, but seen within the replay window
	Unauthorized = "unauthorized" // unknown provider, or a missing or wrong signature
	Invalid      = "invalid"      // wrong method, content type, size, or payload
	Limited      = "limited"      // the client is over its rate limit
)

// Results is the closed set of result label values.
var Results = []string{Accepted, Ignored, Replayed, Unauthorized, Invalid, Limited}

// Defaults for the zero values of Config.
const (
	DefaultMaxBody       = 1 << 20
	DefaultReplayWindow  = 10 * time.Minute
	DefaultRatePerClient = rate.Limit(1)
	DefaultBurst         = 20
	DefaultReadTimeout   = 10 * time.Second
	DefaultMaxReplayKeys = 1 << 16
	DefaultMaxClients    = 1 << 12
)

// Config configures the handler New returns.
type Config struct {
	// Secret is the shared secret: the HMAC key of GitHub, Gitea, Forgejo
	// and Bitbucket, and GitLab's token. Required.
	Secret []byte
	// Follows reports whether a push to ref ("refs/heads/main",
	// "refs/tags/v1") concerns recond. Required.
	Follows func(ref string) bool
	// Request asks for a tick and returns its id. It must not block. Its
	// ctx carries the request's values (its span, if the server is traced)
	// but is never cancelled. Required.
	Request func(ctx context.Context, provider string) uint64
	// Observe counts each request once, with a provider from Providers and
	// a result from Results. May be nil.
	Observe func(provider, result string)
	// Log receives a line per refused request (at Warn for unauthorized
	// ones) and per accepted one. Nil discards.
	Log *slog.Logger
	// MaxBody caps the body; 0 means DefaultMaxBody.
	MaxBody int64
	// ReplayWindow is how long a delivery is remembered; 0 means
	// DefaultReplayWindow.
	ReplayWindow time.Duration
	// MaxReplayKeys bounds the replay cache; 0 means DefaultMaxReplayKeys.
	MaxReplayKeys int
	// RatePerClient and Burst shape the token bucket of each client; 0
	// means DefaultRatePerClient and DefaultBurst. rate.Inf turns the limit
	// off.
	RatePerClient rate.Limit
	Burst         int
	// MaxClients bounds the number of buckets kept; 0 means
	// DefaultMaxClients.
	MaxClients int
	// ClientKey names the client a request counts against; nil means the
	// host of RemoteAddr. Behind a trusted proxy, return the address it
	// reports instead.
	ClientKey func(*http.Request) string
	// ReadTimeout bounds the time to read the body, from the moment the
	// handler starts; 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
	// Now is the clock of the rate limit and the replay window; nil means
	// time.Now.
	Now func() time.Time
}

// Answer is the JSON body of every response.
type Answer struct {
	// Result is one of Results.
	Result string `json:"result"`
	// Tick is the id of the tick asked for, when Result is Accepted.
	Tick uint64 `json:"tick,omitempty"`
	// Message says why, in a few words; it never quotes the request.
	Message string `json:"message,omitempty"`
}

// New returns the webhook handler, or an error when cfg lacks a required
// field or holds a negative one.
func New(cfg Config) (http.Handler, error) {
	switch {
	case len(cfg.Secret) == 0:
		return nil, errors.New("webhook: no secret")
	case cfg.Follows == nil:
		return nil, errors.New("webhook: no Follows")
	case cfg.Request == nil:
		return nil, errors.New("webhook: no Request")
	case cfg.MaxBody < 0, cfg.ReplayWindow < 0, cfg.RatePerClient < 0, cfg.Burst < 0,
		cfg.ReadTimeout < 0, cfg.MaxReplayKeys < 0, cfg.MaxClients < 0:
		return nil, errors.New("webhook: negative limit")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string, string) {}
	}
	cfg.MaxBody = cmp.Or(cfg.MaxBody, DefaultMaxBody)
	cfg.ReplayWindow = cmp.Or(cfg.ReplayWindow, DefaultReplayWindow)
	cfg.MaxReplayKeys = cmp.Or(cfg.MaxReplayKeys, DefaultMaxReplayKeys)
	cfg.RatePerClient = cmp.Or(cfg.RatePerClient, DefaultRatePerClient)
	cfg.Burst = cmp.Or(cfg.Burst, DefaultBurst)
	cfg.MaxClients = cmp.Or(cfg.MaxClients, DefaultMaxClients)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, DefaultReadTimeout)
	if cfg.ClientKey == nil {
		cfg.ClientKey = remoteHost
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	return &handler{
		cfg:     cfg,
		verify:  newVerifier(cfg.Secret),
		limiter: newLimiter(cfg.RatePerClient, cfg.Burst, cfg.MaxClients),
		seen:    newReplayCache(cfg.ReplayWindow, cfg.MaxReplayKeys),
	}, nil
}

type handler struct {
	cfg     Config
	verify  verifier
	limiter *limiter
	seen    *replayCache
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := detect(r.Header)
	client := h.cfg.ClientKey(r)
	status, a := h.serve(w, r, hd, client)
	h.cfg.Observe(hd.provider, a.Result)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// serve runs the steps in the order doc.go gives, cheapest first.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, hd headers, client string) (int, Answer) {
	log := h.cfg.Log.With("remote", clip(client), "provider", hd.provider,
		"event", clip(hd.event), "delivery", clip(hd.delivery))

	if !h.limiter.allow(client, h.cfg.Now()) {
		log.Debug("webhook refused", "result", Limited)
		retry := 1
		if l := float64(h.cfg.RatePerClient); l > 0 && l < 1 {
			retry = int(1/l) + 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		return http.StatusTooManyRequests, Answer{Result: Limited, Message: "too many requests"}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		log.Debug("webhook refused", "result", Invalid, "reason", "method")
		return http.StatusMethodNotAllowed, Answer{Result: Invalid, Message: "POST only"}
	}
	media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (media != "application/json" && media != "application/x-www-form-urlencoded") {
		log.Debug("webhook refused", "result", Invalid, "reason", "content type")
		return http.StatusUnsupportedMediaType, Answer{Result: Invalid, Message: "content type must be application/json"}
	}
	if hd.provider == Unknown {
		log.Warn("webhook refused", "result", Unauthorized, "reason", "unknown provider")
		return http.StatusUnauthorized, Answer{Result: Unauthorized, Message: "unknown provider"}
	}
	if hd.scheme == schemeNone {
		log.Warn("webhook refused", "result", Unauthorized, "reason", "no signature")
		return http.StatusUnauthorized, Answer{Result: Unauthorized, Message: "no signature"}
	}

	body, status, err := h.read(w, r)
	if err != nil {
		log.Info("webhook refused", "result", Invalid, "reason", "body", "err", err)
		return status, Answer{Result: Invalid, Message: http.StatusText(status)}
	}
	if !h.verify.verify(hd.scheme, hd.proof, body) {
		log.Warn("webhook refused", "result", Unauthorized, "reason", "wrong signature", "bytes", len(body))
		return http.StatusUnauthorized, Answer{Result: Unauthorized, Message: "wrong signature"}
	}

	// Authentic from here on. The delivery header is not signed, so a
	// captured request could be replayed under a fresh delivery id: the
	// digest of the signed body is remembered too.
	digest := sha256.Sum256(body)
	keys := []string{hd.provider + "\x00body\x00" + string(digest[:])}
	if hd.delivery != "" {
		keys = append(keys, hd.provider+"\x00id\x00"+hd.delivery)
	}
	if h.seen.seen(h.cfg.Now(), keys...) {
		log.Info("webhook replayed", "result", Replayed)
		return http.StatusOK, Answer{Result: Replayed, Message: "delivery already received"}
	}

	payload := body
	if media == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("payload") == "" {
			log.Info("webhook refused", "result", Invalid, "reason", "form without payload")
			return http.StatusBadRequest, Answer{Result: Invalid, Message: "form without payload"}
		}
		payload = []byte(form.Get("payload"))
	}
	ev, err := parse(hd.provider, hd.event, payload)
	if err != nil {
		log.Info("webhook refused", "result", Invalid, "reason", "payload", "err", err)
		return http.StatusBadRequest, Answer{Result: Invalid, Message: "payload is not a valid event"}
	}

	switch ev.kind {
	case kindPing:
		log.Info("webhook ping", "result", Ignored)
		return http.StatusOK, Answer{Result: Ignored, Message: "pong"}
	case kindPush:
		for _, ref := range ev.refs {
			if h.cfg.Follows(ref) {
				tick := h.cfg.Request(context.WithoutCancel(r.Context()), hd.provider)
				log.Info("webhook accepted", "result", Accepted, "ref", clip(ref), "tick", tick)
				return http.StatusAccepted, Answer{Result: Accepted, Tick: tick, Message: "tick requested"}
			}
		}
		log.Debug("webhook ignored", "result", Ignored, "refs", len(ev.refs))
		return http.StatusOK, Answer{Result: Ignored, Message: "push does not touch the followed ref"}
	}
	log.Debug("webhook ignored", "result", Ignored, "reason", "event")
	return http.StatusOK, Answer{Result: Ignored, Message: "event not acted on"}
}

// read reads the whole body, or fails with the status to answer: 413 as
// soon as more than MaxBody bytes are read (or announced), 408 when the
// read deadline passes, 400 for any other failure.
func (h *handler) read(w http.ResponseWriter, r *http.Request) (body []byte, status int, err error) {
	if r.ContentLength > h.cfg.MaxBody {
		// The body is not read at all; the connection is not reused.
		w.Header().Set("Connection", "close")
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("content length %d over %d", r.ContentLength, h.cfg.MaxBody)
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(h.cfg.ReadTimeout)) == nil {
		// The server does not clear a deadline set here before the next
		// request on a kept-alive connection: clear it after a whole body.
		// After a failed read it stays: the server drains what is left of
		// the body before it answers the next request, and a client that
		// sends it a byte at a time would hold the connection open for as
		// long as it likes.
		defer func() {
			if err == nil {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return buf.Bytes(), 0, nil
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("read body: %w", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, http.StatusRequestTimeout, fmt.Errorf("read body: %w", err)
	}
	return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
}

// clip bounds a value that came from the request before it is logged.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
