package main

import (
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"recond.dev/recond/status"
)

// The seed corpora live in testdata/fuzz/<target>/.

// FuzzParseFlags parses any arguments (one a line) and environment (lines
// "flag-name=value", set as RECOND_FLAG_NAME) for each command: it never
// panics, is deterministic, and either fails with no options or returns
// options that hold everything parseFlags checks.
func FuzzParseFlags(f *testing.F) {
	f.Add(uint8(0), "--repo\nhttps://github.com/example/app.git\n--namespace\nshop", "")
	f.Add(uint8(0), "--repo=file:///srv/git/app\n--path=deploy/overlays/prod\n--interval=30s\n--tick-timeout=20s", "namespace=shop\nlog-format=json")
	f.Add(uint8(1), "--repo=git@github.com:example/app.git\n--git-known-hosts-file=/etc/ssh/known_hosts\n--prune=false", "namespace=shop")
	f.Add(uint8(2), "--repo=.\n--output=json\n--namespace=shop", "")
	f.Add(uint8(2), "--repo=.\n--output=yaml", "")
	f.Add(uint8(0), "--repo=.\n--kube-api-qps=NaN", "")
	f.Add(uint8(0), "--repo=.\n--kube-api-qps=-1", "")
	f.Add(uint8(0), "--repo=.\n--interval=0s", "")
	f.Add(uint8(0), "--repo=.\n--observe=poll", "")
	f.Add(uint8(0), "--repo=.\n--verify-commits", "trusted-keys-file=/etc/recond/keys.asc")
	f.Add(uint8(1), "--repo=.\n--leader-elect-lease-duration=5s\n--leader-elect-renew-deadline=10s", "")
	f.Add(uint8(0), "--repo=.\n--commit-url-template=https://github.com/org/repo/commit/{revision}\n--trace-url-template=ftp://x/{trace_id}", "")
	f.Add(uint8(0), "--repo=.\n--render-max-objects=0", "render-max-depth=abc")
	f.Add(uint8(0), "--repo=.\nextra", "")
	f.Add(uint8(1), "--no-such-flag", "repo=.\ninterval=1h")

	// The process environment must not leak into the options.
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "RECOND_") {
			os.Unsetenv(k)
			f.Cleanup(func() { os.Setenv(k, v) })
		}
	}
	f.Setenv("POD_NAMESPACE", "default")
	cmds := []string{"run", "sync", "diff"}
	f.Fuzz(func(t *testing.T, c uint8, args, env string) {
		cmd := cmds[int(c)%len(cmds)]
		var argv []string
		if args != "" {
			argv = strings.Split(args, "\n")
		}
		for _, line := range strings.Split(env, "\n") {
			name, value, ok := strings.Cut(line, "=")
			if !ok || name == "" || strings.ContainsAny(name, "\x00=") || strings.ContainsRune(value, 0) {
				continue
			}
			key := "RECOND_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if _, set := os.LookupEnv(key); set {
				continue
			}
			if err := os.Setenv(key, value); err != nil {
				continue
			}
			defer os.Unsetenv(key)
		}
		o, err := parseFlags(cmd, argv, io.Discard)
		again, err2 := parseFlags(cmd, argv, io.Discard)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(o, again) {
			t.Fatalf("parseFlags is not deterministic: %+v %v, then %+v %v", o, err, again, err2)
		}
		if err != nil {
			if o != nil {
				t.Fatalf("error %v with options %+v", err, o)
			}
			return
		}
		if problem := invalid(o); problem != "" {
			t.Fatalf("parseFlags(%q, %q) accepted options with %s: %+v", cmd, argv, problem, o)
		}
	})
}

// invalid names what is wrong with options parseFlags returned, or "".
func invalid(o *options) string {
	l := o.source.Limits
	switch {
	case o.repo == "":
		return "no repository"
	case !(o.interval > 0) || !(o.tickTimeout > 0):
		return "an interval or tick timeout that is not positive"
	case !(o.kubeQPS > 0) || o.kubeBurst <= 0:
		return "an API rate limit that is not positive"
	case o.observe != "watch" && o.observe != "list":
		return "an unknown observe mode"
	case o.cmd != "run" && o.observe != "list":
		return "watches for a single tick"
	case o.observe == "watch" && !(o.watch.StaleAfter > 0):
		return "a watch stale limit that is not positive"
	case !(o.rec.HealthTimeout > 0) || !(o.rec.HookTimeout > 0) || o.rec.ApplyConcurrency <= 0:
		return "a health timeout or apply concurrency that is not positive"
	case l.MaxBytes <= 0 || l.MaxObjects <= 0 || l.MaxFileBytes <= 0 || l.MaxDepth <= 0 || l.MaxAliasExpansion <= 0:
		return "a render limit that is not positive"
	case o.source.VerifyCommits != (o.source.TrustedKeysFile != ""):
		return "commit verification without keys, or keys without verification"
	case o.leaderElect && !(o.lease.LeaseDuration > o.lease.RenewDeadline && o.lease.RenewDeadline > o.lease.RetryPeriod && o.lease.RetryPeriod > 0):
		return "leader election timings out of order"
	case o.output != "" && o.output != "text" && o.output != "json":
		return "an unknown output format"
	case o.page.CommitURLTemplate != "" && !status.URLTemplate(o.page.CommitURLTemplate, "{revision}"),
		o.page.TraceURLTemplate != "" && !status.URLTemplate(o.page.TraceURLTemplate, "{trace_id}"):
		return "a link template that is not an http(s) URL with its placeholder"
	case o.namespace == "":
		return "no namespace"
	}
	return ""
}
