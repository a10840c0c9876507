package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// chartStep holds a Helm chart in a namespace of its own with `recond
// sync` (one process per tick, as a CI job would run it): the first sync
// applies the chart (its vendored dependency included, its hook left
// out), a values change rewrites only the Deployment, and a further
// process writes nothing: the generated password comes from the
// instance's seed, not from the process.
func chartStep(s *session) error {
	const ns, name = "demo-chart", "prod"
	ctx, cs, chart, work := s.ctx, s.cs, s.chart, s.work
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
			"--kubeconfig", s.kubeconfig, "--log-format", "text", "--cache-dir", filepath.Join(work, "chart-cache")}
		args = append(args, keys...)
		return exec.Command(s.recondBin, args...)
	}
	sync := func(what string) error {
		log, err := logOf(command("sync"))
		if err != nil {
			return fmt.Errorf("recond sync (%s): %w\n%s", what, err, log)
		}
		printLines(log, " tick ", "hook", " difference ")
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
	return sopsStep(ctx, cs, repo, s.sops, ns, name, &values, &keys, sync)
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
	log, err := logOf(command("sync"))
	if err == nil {
		return fmt.Errorf("recond sync applied a hook that replaces a hand-made Secret")
	}
	printLines(log, " tick ")
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
