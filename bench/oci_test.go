package bench

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/internal/testenv/registry"
	"recond.dev/recond/reconcile/source"
)

// TestOCI measures an OCI source against Git for the same 1,000
// ConfigMaps (one file each): a Flux artifact in a real registry
// (docker-registry on loopback), and a Git repository over smart HTTP.
// For each, the median of 5 pulls into an empty cache and of 5 renders in
// a worker process; then `recond run` of the artifact: the first tick's
// read phase and, once converged, the registry and API requests and the
// duration of 10 ticks (from the tick lines and the registry's front).
//
//	make bench   (or: RECOND_BENCH=1 KUBEBUILDER_ASSETS=... go test -run '^TestOCI$' -v ./bench/)
func TestOCI(t *testing.T) {
	benchOnly(t)
	bin := buildRecond(t)
	const n = 1000
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("deploy/cm-%04d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  k: v-%04d\n", i, i)
	}
	reg := registry.Start(t, registry.Options{Front: true})
	digest := reg.PushFluxArtifact(t, "apps/bench", "v1", files)
	repo := testenv.NewRepo(t)
	repo.Commit("1000 ConfigMaps", files)
	gitURL := repo.ServeHTTP(t, nil)

	measure := func(name string, cfg source.Config) {
		var pulls, renders []time.Duration
		for range 5 {
			cfg.CacheDir, cfg.Path, cfg.Worker = t.TempDir(), "deploy", &source.Worker{Path: renderBinary(bin)}
			src, err := source.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rev, err := src.Fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			pulls = append(pulls, time.Since(start))
			start = time.Now()
			ms, err := src.Render(context.Background(), rev.SHA)
			if err != nil {
				t.Fatal(err)
			}
			renders = append(renders, time.Since(start))
			if len(ms) != n {
				t.Fatalf("%s: %d objects, want %d", name, len(ms), n)
			}
		}
		t.Logf("%s, %d objects: pull into an empty cache %s, render in a worker %s (medians of 5)", name, n, median(pulls), median(renders))
	}
	measure("OCI (Flux artifact, plain HTTP on loopback)", source.Config{URL: "oci://" + reg.Host + "/apps/bench", Ref: "v1", OCI: source.OCIOptions{Insecure: true}})
	measure("Git (smart HTTP on loopback, depth 1)", source.Config{URL: gitURL})

	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	proxy := apiproxy.Start(t, cp.Config)
	cmd := exec.Command(bin, "run", "--repo", "oci://"+reg.Host+"/apps/bench", "--ref", "v1", "--path", "deploy", "--oci-insecure",
		"--namespace", cp.Namespace(t), "--kubeconfig", proxy.KubeConfig(t), "--leader-elect=false", "--log-format", "json",
		"--cache-dir", t.TempDir(), "--interval", "1s", "--listen", "127.0.0.1:0",
		// The Events of 1,000 creations drain at the Events client's own
		// rate for minutes after: they are not a converged tick's requests.
		"--events=false")
	w := &testenv.SyncBuffer{}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ticks := regexp.MustCompile(`"msg":"tick".*`)
	waitTicks := func(k int) []string {
		deadline := time.Now().Add(5 * time.Minute)
		for len(ticks.FindAllString(w.String(), -1)) < k {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d ticks; log:\n%s", k, w.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return ticks.FindAllString(w.String(), -1)
	}
	first := waitTicks(1)[0]
	// Applying 1,000 objects at the client's 20 qps takes several ticks:
	// measure once a tick found nothing to do.
	for deadline := time.Now().Add(5 * time.Minute); !regexp.MustCompile(`"outcome":"converged"`).MatchString(w.String()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never converged; log:\n%s", w.String())
		}
	}
	reg.ResetRequests()
	api := proxy.Requests()
	before := len(waitTicks(1))
	after := waitTicks(before + 10)
	regReqs, apiReqs := reg.Requests(), proxy.Requests()-api
	durations := regexp.MustCompile(`"duration":"([^"]+)"`)
	var converged []time.Duration
	for _, l := range after[before:] {
		if m := durations.FindStringSubmatch(l); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				converged = append(converged, d)
			}
		}
	}
	read := regexp.MustCompile(`"read":"([^"]+)"`).FindStringSubmatch(first)
	t.Logf("recond run, artifact %s of %d ConfigMaps: first tick %s (read %s)", digest[:19], n, durations.FindStringSubmatch(first)[1], read[1])
	t.Logf("recond run, converged: %d ticks made %d registry requests %q and %d API requests; tick duration median %s",
		len(after)-before, len(regReqs), uniq(regReqs), apiReqs, median(converged))
}

// uniq is the distinct strings of ss, in order.
func uniq(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
