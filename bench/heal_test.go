package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
)

// TestHealBinary measures heal latency on the binary, as users run it:
// `recond run --observe=watch --interval 3m` holding 900 ConfigMaps; 40
// drifts, one at a time (a merge patch of one ConfigMap's data by another
// manager), each healed by the tick a watch event asks for; the latency
// is the tick line's heal_latency (from the watch event to the end of the
// write that restored the object). With RECOND_BENCH_BEFORE_BIN, the same
// for that binary.
//
//	RECOND_BENCH=1 go test -run '^TestHealBinary$' -v ./bench/   (in make bench)
func TestHealBinary(t *testing.T) {
	benchOnly(t)
	bin := buildRecond(t)
	const n, drifts = 900, 40
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("cm-%04d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  k: v\n", i)
	}
	repo := testenv.NewRepo(t)
	repo.Commit("900 ConfigMaps", files)
	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	kubeconfig := cp.WriteKubeConfig(t)
	bins := map[string]string{"after": bin}
	if before := os.Getenv("RECOND_BENCH_BEFORE_BIN"); before != "" {
		bins["before"] = before
	}
	for name, b := range bins {
		ns := cp.Namespace(t)
		log := &testenv.SyncBuffer{}
		cmd := exec.Command(b, "run", "--repo", repo.Dir, "--namespace", ns, "--kubeconfig", kubeconfig, "--interval", "3m",
			"--observe", "watch", "--log-format", "json", "--cache-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ticks := regexp.MustCompile(`"msg":"tick".*`)
		wait := func(cond func([]string) bool) []string {
			deadline := time.Now().Add(5 * time.Minute)
			for {
				if l := ticks.FindAllString(log.String(), -1); cond(l) {
					return l
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: gave up waiting; log tail:\n%s", name, lastLines(log.String(), 20))
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		converged := regexp.MustCompile(`"outcome":"converged"`)
		wait(func(l []string) bool { return len(l) > 0 && converged.MatchString(l[len(l)-1]) })
		latency := regexp.MustCompile(`"heal_latency":"([^"]+)"`)
		var heals []time.Duration
		for i := range drifts {
			before := len(ticks.FindAllString(log.String(), -1))
			patch := fmt.Sprintf(`{"data":{"k":"drift-%d"}}`, i)
			if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), fmt.Sprintf("cm-%04d", i*20), types.MergePatchType,
				[]byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
				t.Fatal(err)
			}
			l := wait(func(l []string) bool {
				for _, line := range l[min(before, len(l)):] {
					if latency.MatchString(line) {
						return true
					}
				}
				return false
			})
			for _, line := range l[before:] {
				if m := latency.FindStringSubmatch(line); m != nil {
					d, err := time.ParseDuration(m[1])
					if err != nil {
						t.Fatal(err)
					}
					heals = append(heals, d)
					break
				}
			}
			time.Sleep(300 * time.Millisecond) // drifts apart, not a burst
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("%s (%s): %d heals at N=%d, --interval 3m: p50 %s, p99 %s, max %s", name, b, len(heals), n,
			percentile(heals, 50), percentile(heals, 99), percentile(heals, 100))
	}
}
