package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"recond.dev/recond/internal/testenv"
)

// leaseArgs are short Lease timings.
var leaseArgs = []string{"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}

// waitLog waits until the log holds a line matching re and returns the
// first submatch (or the match).
func waitLog(t *testing.T, log *testenv.SyncBuffer, what string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m[len(m)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in the log within 30 s:\n%s", what, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `recond sync` while the instance's running recond holds the Lease says
// so at once, naming the holder and `recond trigger`, ticks nothing and
// exits 1; with --wait-for-lease it waits, and ticks once the Lease is
// free.
func TestSyncWhileAnotherProcessLeads(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	args := append(clusterArgs(t, repo.URL()), leaseArgs...)
	a := startRun(t, "1h", true, args...)
	holder := waitLog(t, a.log, "the leader's identity", regexp.MustCompile(`"msg":"leading: holding the lease"[^\n]*"identity":"([^"]+)"`))

	code, _, stderr := recond(t, append([]string{"sync"}, args...)...)
	if code != 1 {
		t.Errorf("sync while another process leads: exit %d, want 1", code)
	}
	for _, want := range []string{`"msg":"another process of this instance holds the lease`, `"holder":"` + holder + `"`, "recond trigger", "--wait-for-lease"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("sync's log lacks %q", want)
		}
	}
	if strings.Contains(stderr, `"msg":"tick"`) || strings.Contains(stderr, `"msg":"leading:`) {
		t.Errorf("sync ticked beside the leader")
	}

	// --wait-for-lease: standby until the leader stops, then one tick.
	var log testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- run(ctx, append([]string{"sync", "--wait-for-lease", "40s"}, args...), io.Discard, &log)
	}()
	waitLog(t, &log, "sync waits as standby", regexp.MustCompile(`"msg":"standby: another process holds the lease`))
	if c := a.stop(); c != 0 {
		t.Fatalf("leader exit %d", c)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(log.String(), `"msg":"tick"`) {
			t.Errorf("sync --wait-for-lease after the leader stopped: exit %d\n%s", code, log.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("sync --wait-for-lease did not end:\n%s", log.String())
	}
}

// kubeconfigAs writes the admin kubeconfig impersonating user, so that RBAC
// applies to user.
func kubeconfigAs(t *testing.T, user string) string {
	t.Helper()
	return cp.WriteKubeConfigAs(t, user)
}

// grantLeaseOf gives user in ns what the shipped Role gives recond for
// instance: its ConfigMaps and the Lease of that instance only.
func grantLeaseOf(t *testing.T, ns, user, instance string) {
	t.Helper()
	rbac := cp.Client.RbacV1()
	ctx := context.Background()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "recond"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"recond-leader-" + instance}, Verbs: []string{"get", "update", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "recond"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "recond"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A process whose Role does not name its Lease (--name other than the
// instance the Role was written for) says so in its own log, counts it in
// recond_lease_failures_total{reason="forbidden"} and answers /readyz 503
// with the reason; `recond sync` there exits 1 at once, reason forbidden,
// instead of waiting.
func TestLeaseTheRoleDoesNotNameIsAnError(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	ns := cp.Namespace(t)
	grantLeaseOf(t, ns, "recond-user", "recond")
	args := append([]string{"--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfigAs(t, "recond-user"),
		"--log-format", "json", "--cache-dir", t.TempDir(), "--name", "other", "--events=false"}, leaseArgs...)

	code, _, stderr := recond(t, append([]string{"sync"}, args...)...)
	if code != 1 || !strings.Contains(stderr, `"msg":"cannot campaign for the lease; nothing done"`) || !strings.Contains(stderr, `"reason":"forbidden"`) {
		t.Errorf("sync with a Lease the Role does not name: exit %d, want 1 saying reason forbidden", code)
	}

	r := startRun(t, "1h", false, args...)
	waitLog(t, r.log, "the refused Lease in recond's log", regexp.MustCompile(`"level":"ERROR","msg":"cannot use the lease"[^\n]*forbidden`))
	resp, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "cannot campaign for the lease") || !strings.Contains(string(body), "forbidden") {
		t.Errorf("/readyz = %d %q, want 503 with the refused Lease", resp.StatusCode, body)
	}
	if m := get(t, "http://"+r.addr+"/metrics"); !regexp.MustCompile(`\nrecond_lease_failures_total\{reason="forbidden"\} [1-9]`).MatchString(m) {
		t.Errorf("/metrics lack recond_lease_failures_total{reason=\"forbidden\"} > 0")
	}
	if strings.Contains(r.log.String(), `"msg":"tick"`) {
		t.Errorf("ticked without the Lease")
	}
}

// `recond sync`'s own --tick-timeout is reason timeout, under the Lease as
// without it (the tick's context used to be cancelled by the election's,
// and said "context canceled", reason other).
func TestSyncTickTimeoutIsReasonTimeout(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	// A Git server that accepts and never answers.
	url := repo.ServeHTTP(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	})
	for _, le := range []string{"--leader-elect=true", "--leader-elect=false"} {
		t.Run(le, func(t *testing.T) {
			args := append(clusterArgs(t, url), le, "--tick-timeout", "2s")
			code, _, stderr := recond(t, append([]string{"sync"}, args...)...)
			if code != 1 || !strings.Contains(stderr, `"msg":"tick"`) || !strings.Contains(stderr, `"reason":"timeout"`) || strings.Contains(stderr, "context canceled") {
				t.Errorf("sync past its --tick-timeout: exit %d, want 1 with reason timeout", code)
			}
		})
	}
}

// client-go's own log lines (klog) go through recond's handler: one format
// per process, marked source=client-go.
func TestClientGoLogsInRecondsFormat(t *testing.T) {
	repo := testenv.NewRepo(t)
	args := clusterArgs(t, repo.URL())
	o, err := parseFlags("sync", args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log testenv.SyncBuffer
	if _, err := newApp(o, &log); err != nil {
		t.Fatal(err)
	}
	klog.ErrorS(io.ErrUnexpectedEOF, "reflector watch failed", "resource", "configmaps")
	klog.Infof("a klog line %d", 7)
	klog.Flush()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\{"time":[^\n]*"level":"ERROR","msg":"reflector watch failed"[^\n]*"source":"client-go"`),
		regexp.MustCompile(`\{"time":[^\n]*"level":"INFO","msg":"a klog line 7"[^\n]*"source":"client-go"`),
	} {
		if !want.MatchString(log.String()) {
			t.Errorf("recond's log lacks %s:\n%s", want, log.String())
		}
	}
}
