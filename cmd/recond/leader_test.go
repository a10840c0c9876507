package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// get returns the body of an HTTP GET.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Two processes with the same --name and different repositories: one holds
// the Lease and writes, the other waits as standby and says so (log line,
// recond_leader 0, /readyz); they never prune or overwrite each other. When
// the leader stops, the standby takes over within the lease duration.
func TestSecondProcessOfAnInstanceIsStandby(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	kubeconfig := cp.WriteKubeConfig(t)
	repoA, repoB := testenv.NewRepo(t), testenv.NewRepo(t)
	repoA.Commit("a", map[string]string{"cm.yaml": cmYAML})
	repoB.Commit("b", map[string]string{"cm.yaml": strings.Replace(cmYAML, "k: v", "k: from-b", 1),
		"other.yaml": strings.Replace(cmYAML, "name: c", "name: only-b", 1)})
	args := func(repo string) []string {
		// A tick timeout well above a tick's cost (the interval, 1 s, by
		// default): a slow tick on a loaded machine is not the test's.
		return append([]string{"--repo", repo, "--namespace", ns, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "--tick-timeout", "30s"},
			leaseArgs...)
	}
	a := startRun(t, "1s", true, args(repoA.URL())...)
	if m := get(t, "http://"+a.addr+"/metrics"); !strings.Contains(m, "\nrecond_leader 1\n") {
		t.Errorf("leader's /metrics lack recond_leader 1")
	}
	cm := func() (string, string) {
		t.Helper()
		c, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Data["k"], c.ResourceVersion
	}
	_, rv := cm()

	b := startRun(t, "1s", false, args(repoB.URL())...)
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for !strings.Contains(b.log.String(), `"msg":"standby: another process holds the lease; waiting to take over"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the second process never said it is standby; log:\n%s", b.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body := get(t, "http://"+b.addr+"/readyz"); !strings.HasPrefix(body, "standby: lease recond-leader-recond held by ") {
		t.Errorf("standby /readyz says %q", body)
	}
	if m := get(t, "http://"+b.addr+"/metrics"); !strings.Contains(m, "\nrecond_leader 0\n") {
		t.Errorf("standby's /metrics lack recond_leader 0")
	}
	time.Sleep(3 * time.Second) // three of a's ticks, and b's lease attempts
	if k, now := cm(); k != "v" || now != rv {
		t.Fatalf("ConfigMap c changed while a leads (k=%q, resourceVersion %s -> %s)", k, rv, now)
	}
	if strings.Contains(b.log.String(), `"msg":"tick"`) {
		t.Fatalf("the standby ticked:\n%s", b.log.String())
	}

	stopped := time.Now()
	if code := a.stop(); code != 0 {
		t.Fatalf("leader exit %d", code)
	}
	for {
		if k, _ := cm(); k == "from-b" {
			break
		}
		if time.Since(stopped) > time.Minute { // a guard against a hang
			t.Fatalf("the standby did not take over; log:\n%s", b.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("standby applied its revision %s after the leader stopped", time.Since(stopped).Round(10*time.Millisecond))
	if m := get(t, "http://"+b.addr+"/metrics"); !strings.Contains(m, "\nrecond_leader 1\n") {
		t.Errorf("new leader's /metrics lack recond_leader 1")
	}
}

// With --leader-elect-mode=claim a process takes the Lease at once from a
// process that crashed holding it (its term an hour from its end) and
// ticks; a second process of the instance claims it in turn, and the
// first stops writing and exits 1 saying that the instance must run as one
// pod.
func TestClaimedLeaseIsTakenFromACrashedProcess(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	kubeconfig := cp.WriteKubeConfig(t)
	repo := testenv.NewRepo(t)
	repo.Commit("a", map[string]string{"cm.yaml": cmYAML})
	holder, secs, now := "crashed", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := cp.Client.CoordinationV1().Leases(ns).Create(context.Background(), &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "recond-leader-recond"},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "--tick-timeout", "30s",
		"--leader-elect-mode", "claim"}
	a := startRun(t, "1s", true, args...)
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{}); err != nil {
		t.Fatalf("the claimant did not apply: %v", err)
	}
	if !strings.Contains(a.log.String(), `"msg":"claiming the lease from its last holder"`) {
		t.Errorf("the claimant did not say whose Lease it took; log:\n%s", a.log.String())
	}
	startRun(t, "1s", true, args...)
	waitLog(t, a.log, "the first claimant's loss", regexp.MustCompile(`"msg":"leadership lost: no more writes".*replicas: 1, strategy: Recreate`))
	if code := a.stop(); code != 1 {
		t.Errorf("the first claimant exited %d, want 1", code)
	}
}
