// Package webhook receives Git push webhooks from GitHub, Gitea and Forgejo,
// GitLab and Bitbucket, and turns a push to the followed ref into a request
// for a tick.
//
// New returns an http.Handler meant to be mounted at /hooks/git. Each request
// goes through the same steps, cheapest first, so that an unauthenticated
// flood costs little:
//
//  1. the provider is told from its event header (a header lookup only);
//  2. a per-client token bucket (429 "limited");
//  3. the method (POST only, 405) and the content type (JSON, or a form with
//     a payload field; anything else 415);
//  4. the presence of the provider's signature or token header (401);
//  5. the body, read through http.MaxBytesReader under a read deadline: a
//     body over the cap is refused with 413 as soon as the cap is passed;
//  6. the signature over the raw bytes: HMAC-SHA256 compared with hmac.Equal,
//     or GitLab's token compared in constant time (401 "unauthorized");
//  7. the replay check: a delivery id, or the same signed body, seen in the
//     replay window is acknowledged with 200 "replayed" and not acted on;
//  8. the JSON parse (400 "invalid");
//  9. the event: a ping is answered "pong"; a push that touches the followed
//     ref calls Config.Request and is answered 202 "accepted" with the tick
//     id; anything else is 200 "ignored".
//
// The handler never waits for a tick: Config.Request must return at once.
// Every request is counted once through Config.Observe with a provider from
// Providers and a result from Results. Answers are small JSON bodies that
// never echo the secret, a signature or the payload.
//
// The package is a leaf: it imports nothing of recond, so the loop, the
// metrics and the HTTP server are wired together by the caller.
package webhook
