package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
)

// BenchmarkAck measures how long POST /api/v1/sync (and POST /hooks/git,
// signed) take to answer while recond manages 1,000 ConfigMaps and ticks
// back to back (--observe=list, so that a tick is nearly always running):
// the handlers never wait for a tick. It reports the p50 and p99 of the
// answers.
//
//	go test -run '^$' -bench Ack ./cmd/recond/
func BenchmarkAck(b *testing.B) {
	cp.Require(b)
	ns := cp.Namespace(b)
	repo := testenv.NewRepo(b)
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("cm-%04d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  k: v%d\n", i, i)
	}
	repo.Commit("1000 ConfigMaps", files)
	// A free port of our own: the log (warn level) does not say where.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	token := writeFile(b, "token", "bench-token")
	secret := writeFile(b, "secret", benchWebhookSecret)
	opts, err := parseFlags("run", []string{"--repo", repo.URL(), "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(b),
		"--cache-dir", b.TempDir(), "--leader-elect=false", "--observe", "list", "--interval", "10ms", "--tick-timeout", "1m",
		"--listen", addr, "--log-format", "json", "--log-level", "warn", "--events=false",
		"--sync-token-file", token, "--webhook-secret-file", secret}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	log := &testenv.SyncBuffer{}
	a, err := newApp(opts, log)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- a.run(ctx) }()
	defer func() { cancel(); <-done }()
	for a.rec.Progress().Finished < 1 { // the first sync is done: ticks are converged passes over 1,000 objects
		time.Sleep(50 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, endpoint := range []string{"sync", "webhook"} {
		b.Run(endpoint, func(b *testing.B) {
			var took, accepted []time.Duration
			running := 0
			for i := 0; b.Loop(); i++ {
				var req *http.Request
				if endpoint == "sync" {
					req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/sync", nil)
					req.Header.Set("Authorization", "Bearer bench-token")
				} else {
					req = benchPush("http://"+addr+"/hooks/git", fmt.Sprintf("bench-%d-%d", b.N, i))
				}
				if a.rec.Progress().Running {
					running++
				}
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
				if resp.StatusCode == http.StatusAccepted {
					accepted = append(accepted, took[len(took)-1])
				}
				if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusTooManyRequests {
					b.Fatalf("%s: %s", endpoint, resp.Status)
				}
				time.Sleep(40 * time.Millisecond) // mostly under the rate limits (sync 20/s; webhook 1/s per client after a burst of 20)
			}
			// Every answer (a 429 past the rate limit is an answer too), and
			// the accepted ones alone (authenticated, a tick asked for).
			slices.Sort(took)
			slices.Sort(accepted)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			if len(accepted) > 0 {
				b.ReportMetric(float64(accepted[len(accepted)*99/100].Microseconds())/1000, "accepted-p99-ms")
			}
			b.ReportMetric(float64(len(accepted)), "accepted")
			b.ReportMetric(100*float64(running)/float64(len(took)), "%-during-a-tick")
		})
	}
	if strings.Contains(log.String(), `"level":"ERROR"`) {
		b.Errorf("errors while measuring:\n%s", log.String())
	}
}

const benchWebhookSecret = "bench-webhook-secret"

// benchPush is a GitHub push to refs/heads/main, signed with
// benchWebhookSecret, with its own delivery id.
// (GitHub's deliveries differ in their bodies too, which are signed: the
// receiver drops a body it has seen as a replay, whatever its delivery id.)
func benchPush(url, delivery string) *http.Request {
	after := sha256.Sum256([]byte(delivery))
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"%x","repository":{"full_name":"org/repo"}}`, after[:20])
	return testenv.GitHubPush(url, delivery, body, benchWebhookSecret)
}
