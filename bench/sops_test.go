package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source"
)

// TestSOPS measures what decrypting costs: the same 100 Secrets (one per
// file) in plain text and encrypted by the real sops for an age key, with
// --encrypted-regex '^(data|stringData)$' as docs/secrets.md advises. For
// each, the median of 5 renders in a worker process (as the binary
// renders) and the peak RSS of a `recond sync` of them; with
// RECOND_BENCH_BEFORE_BIN, the peak RSS of that binary (built before the
// decryptor) syncing the plain Secrets, for the before/after figure.
//
//	make bench   (or: RECOND_BENCH=1 SOPS_BIN=... go test -run TestSOPS -v ./bench/)
func TestSOPS(t *testing.T) {
	benchOnly(t)
	s := testenv.LiveSOPS(t)
	id, recipient := s.Keygen()
	keys := s.KeysFile(id)
	bin := buildRecond(t)
	const n = 100
	plain, encrypted := map[string]string{}, map[string]string{}
	for i := range n {
		name := fmt.Sprintf("secret-%03d.yaml", i)
		doc := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s%03d\nstringData:\n  password: p-%03d-%s\n  token: t-%03d-%s\n",
			i, i, "0123456789abcdef", i, "fedcba9876543210")
		plain["plain/"+name] = doc
		encrypted["sops/"+name] = string(s.Encrypt(name, []byte(doc), "--age", recipient, "--encrypted-regex", "^(data|stringData)$"))
	}
	repo := testenv.NewRepo(t)
	files := plain
	for k, v := range encrypted {
		files[k] = v
	}
	repo.Commit("secrets", files)

	renders := map[string]time.Duration{}
	for _, dir := range []string{"plain", "sops"} {
		src, err := source.New(source.Config{URL: repo.Dir, Path: dir, Worker: &source.Worker{Path: renderBinary(bin)}, SOPSAgeKeysFile: keys})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := src.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ds []time.Duration
		for range 5 {
			start := time.Now()
			ms, err := src.Render(context.Background(), rev.SHA)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			if len(ms) != n {
				t.Fatalf("%s: %d objects, want %d", dir, len(ms), n)
			}
		}
		renders[dir] = median(ds)
	}

	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	kubeconfig := cp.WriteKubeConfig(t)
	sync := func(bin, dir string, extra ...string) uint64 {
		args := append([]string{"sync", "--repo", repo.Dir, "--path", dir, "--namespace", cp.Namespace(t), "--kubeconfig", kubeconfig,
			"--leader-elect=false", "--log-format", "json", "--cache-dir", t.TempDir()}, extra...)
		return peakRSS(t, exec.Command(bin, args...)) << 10
	}
	rss := map[string]uint64{
		"plain": sync(bin, "plain", "--sops-age-keys-file", keys),
		"sops":  sync(bin, "sops", "--sops-age-keys-file", keys),
	}
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	t.Logf("binary %s: %.1f MiB", bin, float64(size(bin))/(1<<20))
	if before := os.Getenv("RECOND_BENCH_BEFORE_BIN"); before != "" {
		rss["before"] = sync(before, "plain")
		t.Logf("binary before the decryptor %s: %.1f MiB; recond sync of the plain Secrets: peak RSS %s", before,
			float64(size(before))/(1<<20), fmtMiB(rss["before"]))
	}
	t.Logf("%d Secrets, plain: render in a worker %s (median of 5), recond sync peak RSS %s", n, renders["plain"], fmtMiB(rss["plain"]))
	t.Logf("%d Secrets, SOPS-encrypted: render in a worker %s (median of 5), recond sync peak RSS %s", n, renders["sops"], fmtMiB(rss["sops"]))
}
