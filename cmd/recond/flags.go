package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"recond.dev/recond/leader"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/status"
)

// options are the parsed flags. Each package binds the flags of its own
// settings (BindFlags) and checks them (Validate); cmd holds only the
// settings that wire packages together.
type options struct {
	cmd                 string // run, sync or diff
	repo, ref, path     string
	namespace, name     string
	interval            time.Duration
	tickTimeout         time.Duration
	startJitter         time.Duration // run only
	kubeconfig          string
	kubeQPS             float64
	kubeBurst           int
	listen              string
	logFormat, logLevel string
	cacheDir            string
	output              string

	source source.Config // git-*, verify-commits, render-max-*, helm-*
	worker source.WorkerOptions
	rec    reconcile.Config // prune, self-heal, dry-run, apply-concurrency, health and hook timeouts
	watch  watch.Options    // watch-stale-after
	lease  leader.Config    // leader-elect-*
	page   status.Info      // commit- and trace-url-template

	observe     string
	healthRules string
	events      bool

	syncTokenFile, webhookSecretFile string
	statusPage                       bool

	leaderElect  bool
	waitForLease time.Duration
}

// parseFlags reads the flags of cmd from RECOND_* environment variables and
// then from args (args win).
func parseFlags(cmd string, args []string, stderr io.Writer) (*options, error) {
	o := &options{cmd: cmd}
	fs := flag.NewFlagSet("recond "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.repo, "repo", "", "where the manifests live: a Git repository (a local path, file://, https://, ssh:// or git@host:path URL) or a registry repository (oci://HOST/REPOSITORY; see docs/oci.md) (required)")
	fs.StringVar(&o.ref, "ref", "", "branch, tag or commit SHA to follow (default: the remote HEAD); for an oci:// repository, a tag (default latest) or a sha256: digest")
	fs.StringVar(&o.path, "path", ".", "directory in the repository holding the manifests (YAML/JSON files, a kustomization or a Helm chart)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace to manage (default: $POD_NAMESPACE, then the service account's namespace)")
	fs.StringVar(&o.name, "name", "recond", "instance name, recorded in label recond.dev/instance; two instances in one namespace need different names")
	fs.DurationVar(&o.interval, "interval", 3*time.Minute, "time between ticks")
	fs.DurationVar(&o.tickTimeout, "tick-timeout", 0, "time limit of one tick (default: --interval)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
	// The client-side limit guards the API server against a runaway
	// process, not a fleet against its own first syncs: a process has at
	// most --apply-concurrency writes (or dry runs) in flight, and the
	// server's priority and fairness queues what a fleet sends, answering
	// 429 with Retry-After, which client-go retries (docs/performance.md,
	// "Client limits for a fleet"). Set so that a first sync of a few
	// thousand objects is paced by the server's answers, not by the limit.
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 1000, "requests per second to the API server (client-side rate limit)")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 2000, "burst of requests to the API server above --kube-api-qps")
	fs.StringVar(&o.listen, "listen", ":8080", "address for /healthz and /readyz (run only); empty disables")
	fs.StringVar(&o.logFormat, "log-format", "auto", "auto, text or json (auto: text on a terminal, JSON otherwise)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "directory for the clone of a remote repository (default: a recond directory in the system temp dir)")
	o.source.BindFlags(fs)
	o.worker.BindFlags(fs)
	o.rec.BindFlags(fs)
	fs.StringVar(&o.healthRules, "health-rules", "", "YAML file of per-kind health rules (CEL expressions current, inProgress, failed), for kinds that do not follow kstatus conventions")
	o.observe = "list" // sync and diff tick once: nothing to keep watching
	if cmd == "run" {
		fs.DurationVar(&o.startJitter, "start-jitter", 0, "wait a random time up to this long after starting, before campaigning for the Lease and the first tick, so that many processes started at once (a fleet's rollout, a node's restart) spread their first syncs (0: start at once; see docs/performance.md, \"Client limits for a fleet\")")
		fs.StringVar(&o.observe, "observe", "watch", "how live objects are observed: watch (caches fed by watches; a change by someone else triggers a tick at once) or list (a LIST per kind at every tick; for RBAC without watch)")
		o.watch.BindFlags(fs)
		fs.StringVar(&o.syncTokenFile, "sync-token-file", "", "file holding the bearer token of POST /api/v1/sync (a tick now); the endpoint is off without it")
		fs.StringVar(&o.webhookSecretFile, "webhook-secret-file", "", "file holding the shared secret of POST /hooks/git (GitHub, Gitea/Forgejo, GitLab, Bitbucket push webhooks); off without it")
		fs.BoolVar(&o.statusPage, "status-page", true, "serve the status page on --listen: / (the last ticks as a timeline), /ticks/{id} and /api/v1/status")
		o.page.BindFlags(fs)
	}
	if cmd == "run" || cmd == "sync" {
		fs.BoolVar(&o.events, "events", true, "send Kubernetes Events (events.k8s.io/v1) for each state transition: created, updated, pruned, apply failed, health degraded and recovered, revision applied and healthy, tick failed and recovered")
		fs.BoolVar(&o.leaderElect, "leader-elect", true, "hold a Lease (recond-leader-<name>) so that only one process writes for the instance; others wait as standby")
		o.lease.BindFlags(fs)
	}
	if cmd == "sync" {
		fs.DurationVar(&o.waitForLease, "wait-for-lease", 0, "with --leader-elect: wait up to this long for the Lease when another live process of the instance holds it (0: say who holds it and exit 1 at once; `recond trigger` asks that process for a tick)")
	}
	if cmd == "diff" {
		fs.StringVar(&o.output, "output", "text", "text or json")
	}

	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "RECOND_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				envErr = errors.Join(envErr, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case o.repo == "":
		return nil, errors.New("--repo is required")
	case o.interval <= 0:
		return nil, errors.New("--interval must be positive")
	case o.tickTimeout < 0:
		return nil, errors.New("--tick-timeout must not be negative")
	case o.startJitter < 0:
		return nil, errors.New("--start-jitter must not be negative")
	case !(o.kubeQPS > 0) || o.kubeBurst <= 0: // !(> 0) also refuses NaN
		return nil, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	case o.observe != "watch" && o.observe != "list":
		return nil, fmt.Errorf("--observe must be watch or list, not %q", o.observe)
	case o.waitForLease < 0:
		return nil, errors.New("--wait-for-lease must not be negative")
	case o.output != "" && o.output != "text" && o.output != "json":
		return nil, fmt.Errorf("--output must be text or json, not %q", o.output)
	}
	checks := []func() error{o.source.Validate, o.worker.Validate, o.rec.Validate, o.page.Validate}
	if o.observe == "watch" {
		checks = append(checks, o.watch.Validate)
	}
	if o.leaderElect {
		checks = append(checks, o.lease.Validate)
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return nil, err
		}
	}
	if o.tickTimeout == 0 {
		o.tickTimeout = o.interval
	}
	if o.namespace == "" {
		o.namespace = podNamespace()
	}
	if o.namespace == "" {
		return nil, errors.New("--namespace is required outside a pod (no $POD_NAMESPACE, no service account namespace file)")
	}
	return o, nil
}

const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
