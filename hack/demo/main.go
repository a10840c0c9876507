// Command demo shows recond holding a namespace: it starts a local
// kube-apiserver and etcd, makes a Git repository from the example app, runs
// `recond run` against them, then drifts the cluster and commits to Git while
// recond runs, so that its log shows a first sync, a heal, an update, a
// prune and a refused hostile commit. It stops everything it started.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

func main() {
	recond := flag.String("recond", "bin/recond", "recond binary")
	examples := flag.String("examples", "examples/demo-app", "manifests to put in the repository")
	chart := flag.String("chart", "examples/demo-chart", "a Helm chart to put in a second repository")
	sops := flag.String("sops", "examples/demo-sops", "SOPS-encrypted values for the chart, and the demo's age key")
	interval := flag.Duration("interval", 4*time.Second, "recond's --interval")
	flag.Parse()
	if err := demo(*recond, *examples, *chart, *sops, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...)
}

func demo(recondBin, examples, chart, sops string, interval time.Duration) error {
	ctx := context.Background()
	say("starting kube-apiserver and etcd on 127.0.0.1")
	start := time.Now()
	cp, err := testenv.StartControlPlane()
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		_ = cp.Stop()
	}()
	fmt.Printf("control plane up in %s\n", time.Since(start).Round(time.Millisecond))
	cs := cp.Client
	const ns = "demo"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	work, err := os.MkdirTemp("", "recond-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	repoDir := filepath.Join(work, "repo")
	repo, err := newRepo(repoDir, examples)
	if err != nil {
		return err
	}
	say("made Git repository %s from %s (commit %s)", repoDir, examples, repo.head()[:12])
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return err
	}

	tokenFile := filepath.Join(work, "sync-token")
	if err := os.WriteFile(tokenFile, []byte("demo-token\n"), 0o600); err != nil {
		return err
	}
	args := []string{"run", "--repo", repoDir, "--namespace", ns, "--kubeconfig", kubeconfig,
		"--interval", interval.String(), "--listen", "127.0.0.1:0", "--log-format", "text",
		"--cache-dir", filepath.Join(work, "cache"), "--sync-token-file", tokenFile}
	say("recond %s", strings.Join(args, " "))
	cmd := exec.Command(recondBin, args...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ticks := make(chan string, 100)
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Println("  " + line)
			if m := regexp.MustCompile(` serving .*address=(\S+)`).FindStringSubmatch(line); m != nil {
				listening <- m[1]
			}
			if strings.Contains(line, " tick ") {
				ticks <- line
			}
		}
		close(ticks)
	}()
	defer func() {
		if cmd.ProcessState == nil {
			say("stopping recond (SIGTERM)")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
		for range ticks {
		}
	}()
	// tickLine waits for the next tick line that contains want.
	tickLine := func(want string) (string, error) {
		deadline := time.After(2 * time.Minute)
		for {
			select {
			case line, ok := <-ticks:
				if !ok {
					return "", errors.New("recond exited")
				}
				if strings.Contains(line, want) {
					return line, nil
				}
			case <-deadline:
				return "", fmt.Errorf("no tick with %q within 2m", want)
			}
		}
	}
	waitTick := func(want string) error {
		_, err := tickLine(want)
		return err
	}
	var addr string
	select {
	case addr = <-listening:
	case <-time.After(time.Minute):
		return errors.New("recond never said where it listens")
	}
	line, err := tickLine("outcome=applied")
	if err != nil {
		return err
	}
	fmt.Printf("health after the first sync: %s %s\n", field(line, "health_status"), field(line, "unhealthy"))
	fmt.Printf("status page: http://%s/ (the last ticks as a timeline; JSON at /api/v1/status)\n", addr)
	if err := waitTick("outcome=converged"); err != nil {
		return err
	}

	say("health: this control plane runs no controllers, so the demo writes the status the Deployment controller would (rolled out)")
	if err := testenv.RollOut(ctx, cs, ns, "web", testenv.RolledOut); err != nil {
		return err
	}
	line, err = tickLine("health_status=healthy")
	if err != nil {
		return err
	}
	fmt.Printf("the status write asked for a tick (%s): health_status=healthy, outcome=%s (health is a second dimension)\n",
		field(line, "trigger"), field(line, "outcome"))

	say("drift: scaling Deployment/web to 5 replicas, as `kubectl scale` would")
	// A change within reconcile.HealDebounce of the status write above
	// would join its burst and wait for the window's end; a person's
	// `kubectl scale` comes later than that.
	time.Sleep(2 * reconcile.HealDebounce)
	if err := scale(ctx, cs, ns, 5); err != nil {
		return err
	}
	line, err = tickLine("outcome=applied")
	if err != nil {
		return err
	}
	if m := regexp.MustCompile(`heal_latency=(\S+)`).FindStringSubmatch(line); m != nil {
		fmt.Printf("healed %s after the change, by a tick the watch asked for (trigger=watch), not at the %s interval\n", m[1], interval)
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("Deployment/web has %d replicas again (Git says 2)\n", *d.Spec.Replicas)

	say("new commit: image nginx:1.27 -> nginx:1.28 and a new greeting")
	sha, err := repo.edit("image bump", map[string]func(string) string{
		"deployment.yaml": func(s string) string { return strings.Replace(s, "nginx:1.27", "nginx:1.28", 1) },
		"configmap.yaml":  func(s string) string { return strings.Replace(s, "greeting: hello", "greeting: bonjour", 1) },
	})
	if err != nil {
		return err
	}
	fmt.Printf("committed %s\n", sha[:12])
	if err := waitTick("outcome=applied"); err != nil {
		return err
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	d, err = cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("recond.dev/revision: Deployment/web %s (changed), Service/web %s (unchanged object keeps its revision)\n",
		d.Annotations["recond.dev/revision"][:12], svc.Annotations["recond.dev/revision"][:12])

	say("health: the new image never rolls out; the Deployment controller reports ProgressDeadlineExceeded")
	if err := testenv.RollOut(ctx, cs, ns, "web", testenv.DeadlineExceeded); err != nil {
		return err
	}
	line, err = tickLine("health_status=degraded")
	if err != nil {
		return err
	}
	fmt.Printf("health_status=degraded unhealthy=%s\n", field(line, "unhealthy"))
	if err := printEvents(ctx, cs, ns, "HealthDegraded"); err != nil {
		return err
	}
	say("health: fixed, the rollout completes")
	if err := testenv.RollOut(ctx, cs, ns, "web", testenv.RolledOut); err != nil {
		return err
	}
	if err := waitTick("health_status=healthy"); err != nil {
		return err
	}
	if err := printEvents(ctx, cs, ns, "HealthRecovered"); err != nil {
		return err
	}

	say("new commit: service.yaml removed from Git")
	sha, err = repo.remove("remove the service", "service.yaml")
	if err != nil {
		return err
	}
	fmt.Printf("committed %s\n", sha[:12])
	if err := waitTick("pruned=1"); err != nil {
		return err
	}
	if err := waitTick("outcome=converged"); err != nil {
		return err
	}
	say("hostile commit: a kustomization that also names a URL; recond refuses it in read and changes nothing")
	sha, err = repo.edit("fetch something", map[string]func(string) string{
		"kustomization.yaml": func(string) string {
			return "resources:\n  - configmap.yaml\n  - deployment.yaml\n  - \"http://127.0.0.1:9/evil.yaml#x y\"\n"
		},
	})
	if err != nil {
		return err
	}
	fmt.Printf("committed %s\n", sha[:12])
	if err := waitTick("reason=invalid"); err != nil {
		return err
	}
	sha, err = repo.remove("revert", "kustomization.yaml")
	if err != nil {
		return err
	}
	fmt.Printf("reverted in %s\n", sha[:12])
	if err := waitTick("outcome=converged"); err != nil {
		return err
	}
	say("runaway commit: 12 KB of kustomization that computes for minutes; its render worker is killed at each tick's deadline (%s)", interval)
	var cms, kust strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r%d\n  labels: {app: x}\ndata: {k: v}\n", i)
	}
	kust.WriteString("resources:\n  - configmap.yaml\n  - deployment.yaml\n  - runaway.yaml\npatches:\n")
	for i := range 100 {
		fmt.Fprintf(&kust, "  - target: {kind: ConfigMap, labelSelector: app=x}\n    patch: '[{\"op\": \"add\", \"path\": \"/data/p%d\", \"value\": \"v\"}]'\n", i)
	}
	sha, err = repo.edit("patch everything", map[string]func(string) string{
		"kustomization.yaml": func(string) string { return kust.String() },
		"runaway.yaml":       func(string) string { return cms.String() },
	})
	if err != nil {
		return err
	}
	fmt.Printf("committed %s\n", sha[:12])
	if err := waitTick("reason=timeout"); err != nil {
		return err
	}
	if err := printMetrics("http://"+addr+"/metrics", "recond_loop_stalls_total"); err != nil {
		return err
	}
	// One commit: a tick between two would apply runaway.yaml's 1,000
	// ConfigMaps as plain manifests.
	if sha, err = repo.remove("revert", "kustomization.yaml", "runaway.yaml"); err != nil {
		return err
	}
	start = time.Now()
	fmt.Printf("reverted in %s; recond trigger asks for a tick, as a push webhook would: a render in flight sees the ref move and stops, and the same tick reads the revert\n", sha[:12])
	if err := exec.Command(recondBin, "trigger", "--url", "http://"+addr, "--token-file", tokenFile).Run(); err != nil {
		return fmt.Errorf("recond trigger: %w", err)
	}
	if err := waitTick("outcome=converged"); err != nil {
		return err
	}
	fmt.Printf("converged %s after the revert\n", time.Since(start).Round(time.Millisecond))
	if err := printMetrics("http://"+addr+"/metrics", "recond_renders_superseded_total"); err != nil {
		return err
	}
	say("a tick now, from a shell or a CI job: recond trigger --url http://%s --token-file ... --wait", addr)
	start = time.Now()
	trig := exec.Command(recondBin, "trigger", "--url", "http://"+addr, "--token-file", tokenFile, "--wait")
	trig.Stdout, trig.Stderr = os.Stdout, os.Stderr
	if err := trig.Run(); err != nil {
		return fmt.Errorf("recond trigger: %w", err)
	}
	fmt.Printf("asked, served and reported in %s, on a %s interval\n", time.Since(start).Round(time.Millisecond), interval)
	say("incident: recond suspend --reason ... --for 1h stops the loop's writes, so that a manual fix stays (docs/operations.md)")
	sus := exec.Command(recondBin, "suspend", "--url", "http://"+addr, "--token-file", tokenFile,
		"--reason", "incident 7: web hand-scaled to 5", "--for", "1h", "--by", "demo")
	sus.Stdout, sus.Stderr = os.Stdout, os.Stderr
	if err := sus.Run(); err != nil {
		return fmt.Errorf("recond suspend: %w", err)
	}
	if err := waitTick("suspended_by=demo"); err != nil {
		return err
	}
	if err := scale(ctx, cs, ns, 5); err != nil {
		return err
	}
	line, err = tickLine("outcome=out_of_sync")
	if err != nil {
		return err
	}
	d, err = cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("a tick (trigger=%s) finds the difference: outcome=out_of_sync, nothing written; Deployment/web keeps its %d replicas\n",
		field(line, "trigger"), *d.Spec.Replicas)
	if err := printMetrics("http://"+addr+"/metrics", "recond_suspended", "recond_suspended_until_timestamp_seconds"); err != nil {
		return err
	}
	fmt.Printf("the status page shows a banner: who, why, until when (http://%s/)\n", addr)
	say("recond status --url http://%s", addr)
	st := exec.Command(recondBin, "status", "--url", "http://"+addr)
	st.Stdout, st.Stderr = os.Stdout, os.Stderr
	if err := st.Run(); err != nil {
		return fmt.Errorf("recond status: %w", err)
	}
	say("the fix would now go to Git; recond resume ends the suspension and the loop heals what differs")
	res := exec.Command(recondBin, "resume", "--url", "http://"+addr, "--token-file", tokenFile, "--by", "demo")
	res.Stdout, res.Stderr = os.Stdout, os.Stderr
	if err := res.Run(); err != nil {
		return fmt.Errorf("recond resume: %w", err)
	}
	if err := waitTick("outcome=applied"); err != nil {
		return err
	}
	d, err = cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("resumed: Deployment/web has %d replicas again (Git says 2)\n", *d.Spec.Replicas)
	for _, reason := range []string{"Suspended", "Resumed"} {
		if err := printEvents(ctx, cs, ns, reason); err != nil {
			return err
		}
	}

	say("one object only: kubectl annotate deployment web recond.dev/reconcile=disabled hands it to a human; the rest stays held")
	if err := annotate(ctx, cs, ns, "web", map[string]any{"recond.dev/reconcile": "disabled"}); err != nil {
		return err
	}
	if err := scale(ctx, cs, ns, 4); err != nil {
		return err
	}
	line, err = tickLine("skipped=")
	if err != nil {
		return err
	}
	d, err = cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("the tick lists it as skipped=%s; Deployment/web keeps its %d replicas\n", field(line, "skipped"), *d.Spec.Replicas)
	if err := printMetrics("http://"+addr+"/metrics", `recond_skipped_resources{reason="reconcile_disabled"}`); err != nil {
		return err
	}
	if err := annotate(ctx, cs, ns, "web", map[string]any{"recond.dev/reconcile": nil}); err != nil {
		return err
	}
	if err := waitTick("outcome=applied"); err != nil {
		return err
	}
	d, err = cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("annotation removed: healed, Deployment/web has %d replicas again (more opt-outs: docs/operations.md)\n", *d.Spec.Replicas)

	say("Events: one per state transition (kubectl get events -n %s), none for a converged tick", ns)
	// Settle: the last tick's Events are sent in the background.
	if err := waitTick("outcome=converged"); err != nil {
		return err
	}
	before, err := eventCounts(ctx, cs, ns)
	if err != nil {
		return err
	}
	if err := printEvents(ctx, cs, ns, ""); err != nil {
		return err
	}
	var quiet string
	for range 3 {
		line, err := tickLine("outcome=converged")
		if err != nil {
			return err
		}
		if field(line, "quiet") == "true" {
			quiet = line
		}
	}
	if quiet != "" {
		fmt.Printf("a quiet tick (the ref did not move, nothing changed in the watch caches): duration=%s, no per-object work and no API request\n",
			field(quiet, "duration"))
	}
	time.Sleep(500 * time.Millisecond)
	after, err := eventCounts(ctx, cs, ns)
	if err != nil {
		return err
	}
	var news []string
	for k, n := range after {
		if n != before[k] {
			news = append(news, fmt.Sprintf("%s (%d -> %d)", k, before[k], n))
		}
	}
	fmt.Printf("3 more converged ticks: %d new Events %v\n", len(news), news)

	say("liveness: /healthz fails when the loop starts no tick for 3 intervals (a wedged loop is restarted by the kubelet)")
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("GET /healthz: %d %s", resp.StatusCode, body)
	if err := printMetrics("http://"+addr+"/metrics", "recond_loop_stalls_total", "recond_panics_total"); err != nil {
		return err
	}

	say("crash: kill -9 recond; a new process (recond sync --wait-for-lease 1m) waits until the dead one's Lease expires (15 s), never writing beside it, then goes on from what the cluster holds")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	start = time.Now()
	// The dead process's Lease looks alive until it expires: without
	// --wait-for-lease, sync would say who holds it and exit 1.
	sync := exec.Command(recondBin, "sync", "--wait-for-lease", "1m", "--repo", repoDir, "--namespace", ns, "--kubeconfig", kubeconfig,
		"--log-format", "text", "--cache-dir", filepath.Join(work, "cache"))
	var syncOut strings.Builder
	sync.Stderr = &syncOut
	if err := sync.Run(); err != nil {
		return fmt.Errorf("recond sync after the crash: %w\n%s", err, syncOut.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(syncOut.String()), "\n") {
		if strings.Contains(line, " tick ") {
			fmt.Println("  " + line)
			fmt.Printf("after the crash: outcome=%s pruned=%s, %s after the kill, the Lease's wait included (the fault matrix: docs/reliability.md)\n",
				field(line, "outcome"), field(line, "pruned"), time.Since(start).Round(time.Millisecond))
		}
	}
	if err := chartStep(ctx, cs, recondBin, chart, sops, work, kubeconfig); err != nil {
		return err
	}
	if err := ociStep(ctx, cs, recondBin, examples, work, kubeconfig); err != nil {
		return err
	}
	say("done: recond created, healed, updated, pruned, assessed health, refused a hostile commit, stopped a runaway render, stood still while suspended, left one object to a human, survived a crash, held a Helm chart, refused its hook that would replace a hand-made Secret, decrypted its SOPS-encrypted values and followed an OCI artifact by digest; every later tick is converged")
	return nil
}

// printMetrics prints the series of the named metrics from a /metrics URL.
func printMetrics(url string, names ...string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var sums []string
	for _, name := range names {
		total := 0.0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
					total += v
				}
			}
		}
		sums = append(sums, fmt.Sprintf("%s %g", name, total))
	}
	fmt.Println(strings.Join(sums, ", "))
	return nil
}

// field returns a key=value field of a text log line ("" when absent).
func field(line, key string) string {
	m := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(key) + `=("(?:[^"\\]|\\.)*"|\S+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// eventCounts counts the namespace's Events by name, a repeat counted in
// its series.
func eventCounts(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]int32, error) {
	l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, e := range l.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out[e.Reason+" "+e.Regarding.Kind+"/"+e.Regarding.Name] += n
	}
	return out, nil
}

// printEvents prints the namespace's Events with reason (all when ""),
// waiting a little for one: Events are sent in the background.
func printEvents(ctx context.Context, cs kubernetes.Interface, ns, reason string) error {
	opts := metav1.ListOptions{}
	if reason != "" {
		opts.FieldSelector = "reason=" + reason
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := cs.EventsV1().Events(ns).List(ctx, opts)
		if err != nil {
			return err
		}
		if len(l.Items) > 0 || time.Now().After(deadline) {
			slices.SortFunc(l.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
			for _, e := range l.Items {
				times := ""
				if e.Series != nil {
					times = fmt.Sprintf(" (x%d, the first shown)", e.Series.Count)
				}
				fmt.Printf("  Event %-8s %-16s %s/%s: %s%s\n", e.Type, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note, times)
			}
			if len(l.Items) == 0 {
				fmt.Printf("  no Event with reason %s\n", reason)
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// annotate merges ann (a nil value removes one) into Deployment name's
// annotations, as `kubectl annotate` does.
func annotate(ctx context.Context, cs kubernetes.Interface, ns, name string, ann map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = cs.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	return err
}

func scale(ctx context.Context, cs kubernetes.Interface, ns string, n int32) error {
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	cur, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.ResourceVersion = cur.ResourceVersion
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{FieldManager: "kubectl"})
	return err
}

// demoRepo is the demo's Git repository, written with go-git.
type demoRepo struct {
	dir  string
	repo *git.Repository
}

func newRepo(dir, examples string) (*demoRepo, error) {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		return nil, err
	}
	files := map[string]func(string) string{}
	err = filepath.WalkDir(examples, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(examples, p)
		content := string(b)
		files[filepath.ToSlash(rel)] = func(string) string { return content }
		return err
	})
	if err != nil {
		return nil, err
	}
	d := &demoRepo{dir: dir, repo: r}
	_, err = d.edit("the demo app", files)
	return d, err
}

func (d *demoRepo) head() string {
	h, err := d.repo.Head()
	if err != nil {
		return strings.Repeat("?", 40)
	}
	return h.Hash().String()
}

func (d *demoRepo) edit(msg string, files map[string]func(string) string) (string, error) {
	wt, err := d.repo.Worktree()
	if err != nil {
		return "", err
	}
	for name, f := range files {
		p := filepath.Join(d.dir, name)
		old, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(f(string(old))), 0o644); err != nil {
			return "", err
		}
		if _, err := wt.Add(name); err != nil {
			return "", err
		}
	}
	return d.commit(wt, msg)
}

// remove deletes the files names in one commit.
func (d *demoRepo) remove(msg string, names ...string) (string, error) {
	wt, err := d.repo.Worktree()
	if err != nil {
		return "", err
	}
	for _, name := range names {
		if _, err := wt.Remove(name); err != nil {
			return "", err
		}
	}
	return d.commit(wt, msg)
}

func (d *demoRepo) commit(wt *git.Worktree, msg string) (string, error) {
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "demo", Email: "demo@recond.dev", When: time.Now()}})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// chartStep holds a Helm chart in a namespace of its own with `recond
// sync` (one process per tick, as a CI job would run it): the first sync
// applies the chart (its vendored dependency included, its hook left
// out), a values change rewrites only the Deployment, and a further
// process writes nothing: the generated password comes from the
// instance's seed, not from the process.
func chartStep(ctx context.Context, cs kubernetes.Interface, recondBin, chart, sops, work, kubeconfig string) error {
	const ns, name = "demo-chart", "prod"
	say("a Helm chart (%s: a vendored dependency, a generated password, a hook), rendered by recond itself: no helm binary, no network, no lookup", chart)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	dir := filepath.Join(work, "chart-repo")
	repo, err := newRepo(dir, chart)
	if err != nil {
		return err
	}
	values := "values-prod.yaml"
	var keys []string
	command := func(sub string) *exec.Cmd {
		args := []string{sub, "--repo", dir, "--namespace", ns, "--name", name, "--helm-values", values,
			"--kubeconfig", kubeconfig, "--log-format", "text", "--cache-dir", filepath.Join(work, "chart-cache")}
		args = append(args, keys...)
		return exec.Command(recondBin, args...)
	}
	sync := func(what string) error {
		cmd := command("sync")
		var out strings.Builder
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("recond sync (%s): %w\n%s", what, err, out.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if strings.Contains(line, " tick ") || strings.Contains(line, "hook") || strings.Contains(line, " difference ") {
				fmt.Println("  " + line)
			}
		}
		return nil
	}
	password := func() (string, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name+"-shop-db", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		p := s.Data["password"]
		return fmt.Sprintf("sha256:%x (%d characters)", sha256.Sum256(p), len(p))[:15] + "... (" + strconv.Itoa(len(p)) + " characters)", nil
	}
	fmt.Printf("recond sync --name %s --namespace %s --helm-values values-prod.yaml (commit %s)\n", name, ns, repo.head()[:12])
	if err := sync("first"); err != nil {
		return err
	}
	first, err := password()
	if err != nil {
		return err
	}
	fmt.Printf("generated password %s, from Secret recond-seed-%s\n", first, name)
	sha, err := repo.edit("scale to 3", map[string]func(string) string{"values-prod.yaml": func(string) string { return "replicas: 3\n" }})
	if err != nil {
		return err
	}
	fmt.Printf("committed %s: values-prod.yaml says replicas: 3; the pre-upgrade hook (a Job) runs first, and the tick waits for it\n", sha[:12])
	if err := sync("values change"); err != nil {
		return err
	}
	job := name + "-shop-migrate"
	fmt.Printf("playing the Job controller: Job %s completes\n", job)
	if err := completeJob(ctx, cs, ns, job); err != nil {
		return err
	}
	fmt.Println("the hook succeeded: only the Deployment is rewritten")
	if err := sync("after the hook"); err != nil {
		return err
	}
	fmt.Println("a new process renders the same commit again: nothing to write")
	if err := sync("again"); err != nil {
		return err
	}
	again, err := password()
	if err != nil {
		return err
	}
	fmt.Printf("generated password %s (the same: docs/helm.md)\n", again)
	if err := gateStep(ctx, cs, repo, ns, name, command, sync); err != nil {
		return err
	}
	return sopsStep(ctx, cs, repo, sops, ns, name, &values, &keys, sync)
}

// gateStep shows the write gate: a chart commit whose pre-upgrade hook is
// named like a Secret someone made by hand. recond diff says what the hook
// would delete and that it is refused; recond sync fails in apply with
// reason invalid and the Secret keeps its value; the commit is reverted.
func gateStep(ctx context.Context, cs kubernetes.Interface, repo *demoRepo, ns, name string, command func(string) *exec.Cmd, sync func(string) error) error {
	say("the write gate: a chart hook may replace only an earlier run of a hook of its own, never an object made by hand (docs/security.md)")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-admin"}, StringData: map[string]string{"password": "made-by-hand"}}
	made, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Println("kubectl create secret generic db-admin --from-literal=password=... (by hand, not in Git)")
	const hook = "templates/takeover.yaml"
	sha, err := repo.edit("a hook named like the hand-made Secret", map[string]func(string) string{hook: func(string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-admin\n  annotations: {\"helm.sh/hook\": pre-upgrade}\nstringData: {password: taken}\n"
	}})
	if err != nil {
		return err
	}
	fmt.Printf("committed %s: a pre-upgrade hook Secret db-admin (Helm's default policy would delete the Secret and create the hook)\n", sha[:12])
	out, _ := command("diff").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "hook ") {
			fmt.Println("  recond diff: " + line)
		}
	}
	cmd := command("sync")
	var log strings.Builder
	cmd.Stderr = &log
	if err := cmd.Run(); err == nil {
		return fmt.Errorf("recond sync applied a hook that replaces a hand-made Secret")
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(line, " tick ") {
			fmt.Println("  " + line)
		}
	}
	kept, err := cs.CoreV1().Secrets(ns).Get(ctx, "db-admin", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if kept.UID != made.UID || string(kept.Data["password"]) != "made-by-hand" {
		return fmt.Errorf("the hand-made Secret was replaced")
	}
	fmt.Println("the hand-made Secret db-admin is as it was: same UID, same password")
	if sha, err = repo.remove("revert the hook", hook); err != nil {
		return err
	}
	fmt.Printf("reverted in %s\n", sha[:12])
	return nil
}

// sopsStep commits a SOPS-encrypted values file to the chart's repository:
// recond decrypts it in-process with the demo's age key, the chart makes a
// Secret of it, and a rotated key shows in the difference line as masks.
func sopsStep(ctx context.Context, cs kubernetes.Interface, repo *demoRepo, sops, ns, name string, values *string,
	keys *[]string, sync func(string) error) error {
	say("a SOPS-encrypted values file (%s), decrypted by recond itself with an age key: no sops binary, no KMS", sops)
	read := func(f string) (string, error) {
		b, err := os.ReadFile(filepath.Join(sops, f))
		return string(b), err
	}
	enc, err := read("secrets-prod.yaml")
	if err != nil {
		return err
	}
	rotated, err := read("secrets-prod-rotated.yaml")
	if err != nil {
		return err
	}
	sha, err := repo.edit("an API key, encrypted", map[string]func(string) string{"secrets-prod.yaml": func(string) string { return enc }})
	if err != nil {
		return err
	}
	*values = "values-prod.yaml,secrets-prod.yaml"
	*keys = []string{"--sops-age-keys-file", filepath.Join(sops, "age.agekey")}
	// Each new revision is an upgrade: the chart's pre-upgrade hook runs
	// first, and the demo plays the Job controller for it.
	upgrade := func(what string) error {
		if err := sync(what); err != nil {
			return err
		}
		if err := completeJob(ctx, cs, ns, name+"-shop-migrate"); err != nil {
			return err
		}
		return sync(what + ", after the hook")
	}
	fmt.Printf("committed %s: secrets-prod.yaml holds apiKey: ENC[AES256_GCM,...]; recond sync --helm-values %s --sops-age-keys-file %s\n",
		sha[:12], *values, filepath.Join(sops, "age.agekey"))
	if err := upgrade("encrypted values"); err != nil {
		return err
	}
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, name+"-shop-api", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("Secret %s-shop-api holds the decrypted key (%d characters); no output of recond shows it\n", name, len(s.Data["apiKey"]))
	if sha, err = repo.edit("rotate the API key", map[string]func(string) string{"secrets-prod.yaml": func(string) string { return rotated }}); err != nil {
		return err
	}
	fmt.Printf("committed %s: the API key rotated; the difference shows that it changed, never what it is\n", sha[:12])
	return upgrade("rotated key")
}

// completeJob plays the Job controller: Job name's Complete condition
// becomes True.
func completeJob(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	_, err = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{FieldManager: "job-controller"})
	return err
}
