package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/watch"
)

// options are the parsed flags.
type options struct {
	cmd                 string // run, sync or diff
	repo, ref, path     string
	namespace, name     string
	interval            time.Duration
	tickTimeout         time.Duration
	prune, selfHeal     bool
	dryRun, allowEmpty  bool
	kubeconfig          string
	kubeQPS             float64
	kubeBurst           int
	listen              string
	logFormat, logLevel string
	cacheDir            string
	output              string

	gitUsername, gitPasswordFile, gitTokenFile string
	gitSSHKeyFile, gitKnownHostsFile           string
	insecureSkipHostKeyCheck                   bool

	limits          source.Limits
	worker          source.WorkerOptions
	helm            source.HelmOptions
	verifyCommits   bool
	trustedKeysFile string

	observe          string
	applyConcurrency int
	watchStaleAfter  time.Duration

	healthTimeout time.Duration
	hookTimeout   time.Duration
	healthRules   string
	events        bool

	syncTokenFile, webhookSecretFile    string
	statusPage                          bool
	commitURLTemplate, traceURLTemplate string

	leaderElect                                  bool
	leaseDuration, renewDeadline, leaseRetryTime time.Duration
	waitForLease                                 time.Duration
}

// parseFlags reads the flags of cmd from RECOND_* environment variables and
// then from args (args win).
func parseFlags(cmd string, args []string, stderr io.Writer) (*options, error) {
	o := &options{cmd: cmd}
	fs := flag.NewFlagSet("recond "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.repo, "repo", "", "Git repository: a local path, file://, https://, ssh:// or git@host:path URL (required)")
	fs.StringVar(&o.ref, "ref", "", "branch, tag or commit SHA to follow (default: the remote HEAD)")
	fs.StringVar(&o.path, "path", ".", "directory in the repository holding the manifests (YAML/JSON files, or a kustomization)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace to manage (default: $POD_NAMESPACE, then the service account's namespace)")
	fs.StringVar(&o.name, "name", "recond", "instance name, recorded in label recond.dev/instance; two instances in one namespace need different names")
	fs.DurationVar(&o.interval, "interval", 3*time.Minute, "time between ticks")
	fs.DurationVar(&o.tickTimeout, "tick-timeout", 0, "time limit of one tick (default: --interval)")
	fs.BoolVar(&o.prune, "prune", true, "delete objects recond applied that left Git")
	fs.BoolVar(&o.selfHeal, "self-heal", true, "write drift back at every tick; false: only report it until a new revision arrives")
	fs.BoolVar(&o.dryRun, "dry-run", false, "never write: validate with a server-side dry run and report")
	fs.BoolVar(&o.allowEmpty, "allow-empty", false, "allow an empty desired state (which prunes every owned object)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 200, "requests per second to the API server (client-side rate limit)")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 400, "burst of requests to the API server above --kube-api-qps")
	fs.StringVar(&o.listen, "listen", ":8080", "address for /healthz and /readyz (run only); empty disables")
	fs.StringVar(&o.logFormat, "log-format", "auto", "auto, text or json (auto: text on a terminal, JSON otherwise)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "directory for the clone of a remote repository (default: a recond directory in the system temp dir)")
	fs.StringVar(&o.gitUsername, "git-username", "", "HTTPS basic-auth user name (default \"git\" when a password or token file is given)")
	fs.StringVar(&o.gitPasswordFile, "git-password-file", "", "file holding the HTTPS basic-auth password")
	fs.StringVar(&o.gitTokenFile, "git-token-file", "", "file holding an HTTPS access token (sent as the basic-auth password)")
	fs.StringVar(&o.gitSSHKeyFile, "git-ssh-key-file", "", "file holding the SSH private key")
	fs.StringVar(&o.gitKnownHostsFile, "git-known-hosts-file", "", "known_hosts file to verify SSH host keys against (required for SSH)")
	fs.BoolVar(&o.insecureSkipHostKeyCheck, "insecure-skip-host-key-check", false, "connect over SSH without verifying the host key")
	o.observe = "list" // sync and diff tick once: nothing to keep watching
	if cmd == "run" {
		fs.StringVar(&o.observe, "observe", "watch", "how live objects are observed: watch (caches fed by watches; a change by someone else triggers a tick at once) or list (a LIST per kind at every tick; for RBAC without watch)")
		fs.DurationVar(&o.watchStaleAfter, "watch-stale-after", watch.DefaultStaleAfter, "with --observe=watch: a cache that has seen no event and no bookmark for this long is restarted (a fresh LIST and a new watch) by the tick that reads it, so that a stalled watch cannot hide drift; the API server bookmarks a kind only when resourceVersions move, so a kind quiet across the cluster costs one LIST per this long (per tick when --interval is longer)")
	}
	fs.IntVar(&o.applyConcurrency, "apply-concurrency", 8, "most writes (and validating dry runs) made at once within one dependency wave")
	fs.DurationVar(&o.hookTimeout, "helm-hook-timeout", reconcile.DefaultHookTimeout, "how long a chart's pre- or post-install/upgrade hook may run (a Job until Complete, anything else until current) before it fails the revision with reason hook")
	fs.DurationVar(&o.healthTimeout, "health-timeout", reconcile.DefaultHealthTimeout, "how long an object may stay in progress after recond last applied a change to it (or after it started progressing without one) before its health is failed (\"progress deadline\")")
	fs.StringVar(&o.healthRules, "health-rules", "", "YAML file of per-kind health rules (CEL expressions current, inProgress, failed), for kinds that do not follow kstatus conventions")
	if cmd == "run" {
		fs.StringVar(&o.syncTokenFile, "sync-token-file", "", "file holding the bearer token of POST /api/v1/sync (a tick now); the endpoint is off without it")
		fs.StringVar(&o.webhookSecretFile, "webhook-secret-file", "", "file holding the shared secret of POST /hooks/git (GitHub, Gitea/Forgejo, GitLab, Bitbucket push webhooks); off without it")
		fs.BoolVar(&o.statusPage, "status-page", true, "serve the status page on --listen: / (the last ticks as a timeline), /ticks/{id} and /api/v1/status")
		fs.StringVar(&o.commitURLTemplate, "commit-url-template", "", "link revisions on the status page, e.g. https://github.com/org/repo/commit/{revision}")
		fs.StringVar(&o.traceURLTemplate, "trace-url-template", "", "link ticks to their traces on the status page, e.g. http://jaeger:16686/trace/{trace_id}")
	}
	if cmd == "run" || cmd == "sync" {
		fs.BoolVar(&o.events, "events", true, "send Kubernetes Events (events.k8s.io/v1) for each state transition: created, updated, pruned, apply failed, health degraded and recovered, revision applied and healthy, tick failed and recovered")
	}
	fs.Int64Var(&o.limits.MaxBytes, "render-max-bytes", source.DefaultLimits.MaxBytes, "most bytes a render may read from the commit, and most bytes it may produce")
	fs.IntVar(&o.limits.MaxObjects, "render-max-objects", source.DefaultLimits.MaxObjects, "most objects a render may produce")
	fs.Int64Var(&o.limits.MaxFileBytes, "render-max-file-bytes", source.DefaultLimits.MaxFileBytes, "largest file a render may read")
	fs.IntVar(&o.limits.MaxDepth, "render-max-depth", source.DefaultLimits.MaxDepth, "deepest nesting of maps and lists in one object")
	fs.IntVar(&o.limits.MaxAliasExpansion, "render-max-alias-expansion", source.DefaultLimits.MaxAliasExpansion, "most a YAML document may grow by expanding its aliases, as a multiple of its own size")
	o.worker.BindFlags(fs)
	o.helm.BindFlags(fs)
	fs.BoolVar(&o.verifyCommits, "verify-commits", false, "render only commits (or, for a tag --ref, annotated tags) signed by a key in --trusted-keys-file")
	fs.StringVar(&o.trustedKeysFile, "trusted-keys-file", "", "armored OpenPGP public keys trusted to sign commits (with --verify-commits)")
	if cmd == "run" || cmd == "sync" {
		fs.BoolVar(&o.leaderElect, "leader-elect", true, "hold a Lease (recond-leader-<name>) so that only one process writes for the instance; others wait as standby")
		fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the last renewal before taking over")
		fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
		fs.DurationVar(&o.leaseRetryTime, "leader-elect-retry-period", 2*time.Second, "time between attempts to acquire or renew the Lease")
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
	case !(o.kubeQPS > 0) || o.kubeBurst <= 0: // !(> 0) also refuses NaN
		return nil, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	case o.observe != "watch" && o.observe != "list":
		return nil, fmt.Errorf("--observe must be watch or list, not %q", o.observe)
	case o.observe == "watch" && o.watchStaleAfter <= 0:
		return nil, errors.New("--watch-stale-after must be positive")
	case o.commitURLTemplate != "" && !urlTemplate(o.commitURLTemplate, "{revision}"):
		return nil, fmt.Errorf("--commit-url-template must be an http(s) URL with {revision} in it, not %q", o.commitURLTemplate)
	case o.traceURLTemplate != "" && !urlTemplate(o.traceURLTemplate, "{trace_id}"):
		return nil, fmt.Errorf("--trace-url-template must be an http(s) URL with {trace_id} in it, not %q", o.traceURLTemplate)
	case o.hookTimeout <= 0:
		return nil, errors.New("--helm-hook-timeout must be positive")
	case o.healthTimeout <= 0:
		return nil, errors.New("--health-timeout must be positive")
	case o.applyConcurrency <= 0:
		return nil, errors.New("--apply-concurrency must be positive")
	case o.limits.MaxBytes <= 0 || o.limits.MaxObjects <= 0 || o.limits.MaxFileBytes <= 0 || o.limits.MaxDepth <= 0 || o.limits.MaxAliasExpansion <= 0:
		return nil, errors.New("the --render-max-* limits must be positive")
	case o.worker.Validate() != nil:
		return nil, o.worker.Validate()
	case o.helm.Validate() != nil:
		return nil, o.helm.Validate()
	case o.verifyCommits && o.trustedKeysFile == "":
		return nil, errors.New("--verify-commits needs --trusted-keys-file")
	case !o.verifyCommits && o.trustedKeysFile != "":
		return nil, errors.New("--trusted-keys-file is used only with --verify-commits")
	case o.leaderElect && !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.leaseRetryTime && o.leaseRetryTime > 0):
		return nil, errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0")
	case o.waitForLease < 0:
		return nil, errors.New("--wait-for-lease must not be negative")
	case o.output != "" && o.output != "text" && o.output != "json":
		return nil, fmt.Errorf("--output must be text or json, not %q", o.output)
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

// urlTemplate reports whether t is an http(s) URL that names placeholder.
func urlTemplate(t, placeholder string) bool {
	return (strings.HasPrefix(t, "https://") || strings.HasPrefix(t, "http://")) && strings.Contains(t, placeholder)
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
