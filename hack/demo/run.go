package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// ns is the namespace `recond run` holds.
const ns = "demo"

func startControlPlane(s *session) error {
	say("starting kube-apiserver and etcd on 127.0.0.1")
	start := time.Now()
	cp, err := testenv.StartControlPlane()
	if err != nil {
		return err
	}
	s.onStop(func() {
		say("stopping the control plane")
		_ = cp.Stop()
	})
	fmt.Printf("control plane up in %s\n", time.Since(start).Round(time.Millisecond))
	s.cs = cp.Client
	if _, err := s.cs.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	s.kubeconfigData = cp.KubeConfig
	return nil
}

func makeRepository(s *session) error {
	work, err := os.MkdirTemp("", "recond-demo-")
	if err != nil {
		return err
	}
	s.work = work
	s.onStop(func() { os.RemoveAll(work) })
	s.repoDir = filepath.Join(work, "repo")
	if s.repo, err = newRepo(s.repoDir, s.examples); err != nil {
		return err
	}
	say("made Git repository %s from %s (commit %s)", s.repoDir, s.examples, s.repo.head()[:12])
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, s.kubeconfigData, 0o600); err != nil {
		return err
	}
	s.kubeconfig = kubeconfig
	s.tokenFile = filepath.Join(work, "sync-token")
	return os.WriteFile(s.tokenFile, []byte("demo-token\n"), 0o600)
}

// startRecond starts `recond run`, prints its log indented and waits until
// it says where it listens.
func startRecond(s *session) error {
	args := []string{"run", "--repo", s.repoDir, "--namespace", ns, "--kubeconfig", s.kubeconfig,
		"--interval", s.interval.String(), "--listen", "127.0.0.1:0", "--log-format", "text",
		"--cache-dir", filepath.Join(s.work, "cache"), "--sync-token-file", s.tokenFile}
	say("recond %s", strings.Join(args, " "))
	cmd := exec.Command(s.recondBin, args...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	s.run = cmd
	s.ticks = make(chan string, 100)
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
				s.ticks <- line
			}
		}
		close(s.ticks)
	}()
	s.onStop(func() {
		if cmd.ProcessState == nil {
			say("stopping recond (SIGTERM)")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
		for range s.ticks {
		}
	})
	select {
	case s.addr = <-listening:
		return nil
	case <-time.After(time.Minute):
		return errors.New("recond never said where it listens")
	}
}

// tickLine waits for the next tick line of `recond run` that contains want.
func (s *session) tickLine(want string) (string, error) {
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-s.ticks:
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

// waitTick waits for the next tick line that contains each of want, in
// turn.
func (s *session) waitTick(want ...string) error {
	for _, w := range want {
		if _, err := s.tickLine(w); err != nil {
			return err
		}
	}
	return nil
}

// recond runs a recond command (trigger, suspend, status, resume) to its
// end, its output shown or not.
func (s *session) recond(shown bool, args ...string) error {
	cmd := exec.Command(s.recondBin, args...)
	if shown {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("recond %s: %w", args[0], err)
	}
	return nil
}

// url is `recond run`'s address, with path.
func (s *session) url(path string) string { return "http://" + s.addr + path }

// replicasAfter waits for the next tick line that contains want, and
// returns it with Deployment/web's replicas after that tick.
func (s *session) replicasAfter(want string) (string, int32, error) {
	line, err := s.tickLine(want)
	if err != nil {
		return "", 0, err
	}
	d, err := s.cs.AppsV1().Deployments(ns).Get(s.ctx, "web", metav1.GetOptions{})
	if err != nil {
		return "", 0, err
	}
	return line, *d.Spec.Replicas, nil
}

// commit prints a commit made by a step.
func commit(sha string, err error) error {
	if err == nil {
		fmt.Printf("committed %s\n", sha[:12])
	}
	return err
}

func firstSync(s *session) error {
	line, err := s.tickLine("outcome=applied")
	if err != nil {
		return err
	}
	fmt.Printf("health after the first sync: %s %s\n", field(line, "health_status"), field(line, "unhealthy"))
	fmt.Printf("status page: http://%s/ (the last ticks as a timeline; JSON at /api/v1/status)\n", s.addr)
	return s.waitTick("outcome=converged")
}

func rollOut(s *session) error {
	say("health: this control plane runs no controllers, so the demo writes the status the Deployment controller would (rolled out)")
	if err := testenv.RollOut(s.ctx, s.cs, ns, "web", testenv.RolledOut); err != nil {
		return err
	}
	line, err := s.tickLine("health_status=healthy")
	if err != nil {
		return err
	}
	fmt.Printf("the status write asked for a tick (%s): health_status=healthy, outcome=%s (health is a second dimension)\n",
		field(line, "trigger"), field(line, "outcome"))
	return nil
}

func drift(s *session) error {
	say("drift: scaling Deployment/web to 5 replicas, as `kubectl scale` would")
	// A change within reconcile.HealDebounce of the status write above
	// would join its burst and wait for the window's end; a person's
	// `kubectl scale` comes later than that.
	time.Sleep(2 * reconcile.HealDebounce)
	if err := scale(s.ctx, s.cs, ns, 5); err != nil {
		return err
	}
	line, n, err := s.replicasAfter("outcome=applied")
	if err != nil {
		return err
	}
	if m := regexp.MustCompile(`heal_latency=(\S+)`).FindStringSubmatch(line); m != nil {
		fmt.Printf("healed %s after the change, by a tick the watch asked for (trigger=watch), not at the %s interval\n", m[1], s.interval)
	}
	fmt.Printf("Deployment/web has %d replicas again (Git says 2)\n", n)
	return nil
}

func imageBump(s *session) error {
	say("new commit: image nginx:1.27 -> nginx:1.28 and a new greeting")
	if err := commit(s.repo.edit("image bump", map[string]func(string) string{
		"deployment.yaml": func(f string) string { return strings.Replace(f, "nginx:1.27", "nginx:1.28", 1) },
		"configmap.yaml":  func(f string) string { return strings.Replace(f, "greeting: hello", "greeting: bonjour", 1) },
	})); err != nil {
		return err
	}
	if err := s.waitTick("outcome=applied"); err != nil {
		return err
	}
	svc, err := s.cs.CoreV1().Services(ns).Get(s.ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	d, err := s.cs.AppsV1().Deployments(ns).Get(s.ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("recond.dev/revision: Deployment/web %s (changed), Service/web %s (unchanged object keeps its revision)\n",
		d.Annotations["recond.dev/revision"][:12], svc.Annotations["recond.dev/revision"][:12])
	return nil
}

func degraded(s *session) error {
	say("health: the new image never rolls out; the Deployment controller reports ProgressDeadlineExceeded")
	if err := testenv.RollOut(s.ctx, s.cs, ns, "web", testenv.DeadlineExceeded); err != nil {
		return err
	}
	line, err := s.tickLine("health_status=degraded")
	if err != nil {
		return err
	}
	fmt.Printf("health_status=degraded unhealthy=%s\n", field(line, "unhealthy"))
	return printEvents(s.ctx, s.cs, ns, "HealthDegraded")
}

func recovered(s *session) error {
	say("health: fixed, the rollout completes")
	if err := testenv.RollOut(s.ctx, s.cs, ns, "web", testenv.RolledOut); err != nil {
		return err
	}
	if err := s.waitTick("health_status=healthy"); err != nil {
		return err
	}
	return printEvents(s.ctx, s.cs, ns, "HealthRecovered")
}

func prune(s *session) error {
	say("new commit: service.yaml removed from Git")
	if err := commit(s.repo.remove("remove the service", "service.yaml")); err != nil {
		return err
	}
	return s.waitTick("pruned=1", "outcome=converged")
}

func hostileCommit(s *session) error {
	say("hostile commit: a kustomization that also names a URL; recond refuses it in read and changes nothing")
	if err := commit(s.repo.edit("fetch something", map[string]func(string) string{
		"kustomization.yaml": func(string) string {
			return "resources:\n  - configmap.yaml\n  - deployment.yaml\n  - \"http://127.0.0.1:9/evil.yaml#x y\"\n"
		},
	})); err != nil {
		return err
	}
	if err := s.waitTick("reason=invalid"); err != nil {
		return err
	}
	sha, err := s.repo.remove("revert", "kustomization.yaml")
	if err != nil {
		return err
	}
	fmt.Printf("reverted in %s\n", sha[:12])
	return s.waitTick("outcome=converged")
}

func runawayRender(s *session) error {
	say("runaway commit: 12 KB of kustomization that computes for minutes; its render worker is killed at each tick's deadline (%s)", s.interval)
	var cms, kust strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r%d\n  labels: {app: x}\ndata: {k: v}\n", i)
	}
	kust.WriteString("resources:\n  - configmap.yaml\n  - deployment.yaml\n  - runaway.yaml\npatches:\n")
	for i := range 100 {
		fmt.Fprintf(&kust, "  - target: {kind: ConfigMap, labelSelector: app=x}\n    patch: '[{\"op\": \"add\", \"path\": \"/data/p%d\", \"value\": \"v\"}]'\n", i)
	}
	if err := commit(s.repo.edit("patch everything", map[string]func(string) string{
		"kustomization.yaml": func(string) string { return kust.String() },
		"runaway.yaml":       func(string) string { return cms.String() },
	})); err != nil {
		return err
	}
	if err := s.waitTick("reason=timeout"); err != nil {
		return err
	}
	if err := printMetrics(s.url("/metrics"), "recond_loop_stalls_total"); err != nil {
		return err
	}
	// One commit: a tick between two would apply runaway.yaml's 1,000
	// ConfigMaps as plain manifests.
	sha, err := s.repo.remove("revert", "kustomization.yaml", "runaway.yaml")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Printf("reverted in %s; recond trigger asks for a tick, as a push webhook would: a render in flight sees the ref move and stops, and the same tick reads the revert\n", sha[:12])
	if err := s.recond(false, "trigger", "--url", s.url(""), "--token-file", s.tokenFile); err != nil {
		return err
	}
	if err := s.waitTick("outcome=converged"); err != nil {
		return err
	}
	fmt.Printf("converged %s after the revert\n", time.Since(start).Round(time.Millisecond))
	return printMetrics(s.url("/metrics"), "recond_renders_superseded_total")
}

func triggerAndWait(s *session) error {
	say("a tick now, from a shell or a CI job: recond trigger --url http://%s --token-file ... --wait", s.addr)
	start := time.Now()
	if err := s.recond(true, "trigger", "--url", s.url(""), "--token-file", s.tokenFile, "--wait"); err != nil {
		return err
	}
	fmt.Printf("asked, served and reported in %s, on a %s interval\n", time.Since(start).Round(time.Millisecond), s.interval)
	return nil
}

func suspend(s *session) error {
	say("incident: recond suspend --reason ... --for 1h stops the loop's writes, so that a manual fix stays (docs/operations.md)")
	if err := s.recond(true, "suspend", "--url", s.url(""), "--token-file", s.tokenFile,
		"--reason", "incident 7: web hand-scaled to 5", "--for", "1h", "--by", "demo"); err != nil {
		return err
	}
	if err := s.waitTick("suspended_by=demo"); err != nil {
		return err
	}
	if err := scale(s.ctx, s.cs, ns, 5); err != nil {
		return err
	}
	line, n, err := s.replicasAfter("outcome=out_of_sync")
	if err != nil {
		return err
	}
	fmt.Printf("a tick (trigger=%s) finds the difference: outcome=out_of_sync, nothing written; Deployment/web keeps its %d replicas\n",
		field(line, "trigger"), n)
	if err := printMetrics(s.url("/metrics"), "recond_suspended", "recond_suspended_until_timestamp_seconds"); err != nil {
		return err
	}
	fmt.Printf("the status page shows a banner: who, why, until when (http://%s/)\n", s.addr)
	return nil
}

func status(s *session) error {
	say("recond status --url http://%s", s.addr)
	return s.recond(true, "status", "--url", s.url(""))
}

func resume(s *session) error {
	say("the fix would now go to Git; recond resume ends the suspension and the loop heals what differs")
	if err := s.recond(true, "resume", "--url", s.url(""), "--token-file", s.tokenFile, "--by", "demo"); err != nil {
		return err
	}
	_, n, err := s.replicasAfter("outcome=applied")
	if err != nil {
		return err
	}
	fmt.Printf("resumed: Deployment/web has %d replicas again (Git says 2)\n", n)
	for _, reason := range []string{"Suspended", "Resumed"} {
		if err := printEvents(s.ctx, s.cs, ns, reason); err != nil {
			return err
		}
	}
	return nil
}

func optOut(s *session) error {
	say("one object only: kubectl annotate deployment web recond.dev/reconcile=disabled hands it to a human; the rest stays held")
	if err := annotate(s.ctx, s.cs, ns, "web", map[string]any{"recond.dev/reconcile": "disabled"}); err != nil {
		return err
	}
	if err := scale(s.ctx, s.cs, ns, 4); err != nil {
		return err
	}
	line, n, err := s.replicasAfter("skipped=")
	if err != nil {
		return err
	}
	fmt.Printf("the tick lists it as skipped=%s; Deployment/web keeps its %d replicas\n", field(line, "skipped"), n)
	if err := printMetrics(s.url("/metrics"), `recond_skipped_resources{reason="reconcile_disabled"}`); err != nil {
		return err
	}
	if err := annotate(s.ctx, s.cs, ns, "web", map[string]any{"recond.dev/reconcile": nil}); err != nil {
		return err
	}
	if _, n, err = s.replicasAfter("outcome=applied"); err != nil {
		return err
	}
	fmt.Printf("annotation removed: healed, Deployment/web has %d replicas again (more opt-outs: docs/operations.md)\n", n)
	return nil
}

func eventsPerTransition(s *session) error {
	say("Events: one per state transition (kubectl get events -n %s), none for a converged tick", ns)
	// Settle: the last tick's Events are sent in the background.
	if err := s.waitTick("outcome=converged"); err != nil {
		return err
	}
	before, err := eventCounts(s.ctx, s.cs, ns)
	if err != nil {
		return err
	}
	if err := printEvents(s.ctx, s.cs, ns, ""); err != nil {
		return err
	}
	var quiet string
	for range 3 {
		line, err := s.tickLine("outcome=converged")
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
	after, err := eventCounts(s.ctx, s.cs, ns)
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
	return nil
}

func liveness(s *session) error {
	say("liveness: /healthz fails when the loop starts no tick for 3 intervals (a wedged loop is restarted by the kubelet)")
	resp, err := http.Get(s.url("/healthz"))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("GET /healthz: %d %s", resp.StatusCode, body)
	return printMetrics(s.url("/metrics"), "recond_loop_stalls_total", "recond_panics_total")
}

func crash(s *session) error {
	say("crash: kill -9 recond; a new process (recond sync --wait-for-lease 1m) waits until the dead one's Lease expires (15 s), never writing beside it, then goes on from what the cluster holds")
	_ = s.run.Process.Kill()
	_ = s.run.Wait()
	start := time.Now()
	// The dead process's Lease looks alive until it expires: without
	// --wait-for-lease, sync would say who holds it and exit 1.
	log, err := logOf(exec.Command(s.recondBin, "sync", "--wait-for-lease", "1m", "--repo", s.repoDir, "--namespace", ns, "--kubeconfig", s.kubeconfig,
		"--log-format", "text", "--cache-dir", filepath.Join(s.work, "cache")))
	if err != nil {
		return fmt.Errorf("recond sync after the crash: %w\n%s", err, log)
	}
	for _, line := range linesWith(log, " tick ") {
		fmt.Println("  " + line)
		fmt.Printf("after the crash: outcome=%s pruned=%s, %s after the kill, the Lease's wait included (the fault matrix: docs/reliability.md)\n",
			field(line, "outcome"), field(line, "pruned"), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func done(*session) error {
	say("done: recond created, healed, updated, pruned, assessed health, refused a hostile commit, stopped a runaway render, stood still while suspended, left one object to a human, survived a crash, held a Helm chart, refused its hook that would replace a hand-made Secret, decrypted its SOPS-encrypted values and followed an OCI artifact by digest; every later tick is converged")
	return nil
}
