// Command recond holds one Kubernetes namespace against manifests in a Git
// repository: `recond run` ticks forever, `recond sync` ticks once, `recond
// diff` shows what a tick would change.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `recond holds a Kubernetes namespace against manifests in a Git repository.

Usage:
  recond run      tick now and every --interval, forever (serves /healthz, /readyz)
  recond sync     tick once; exit 0 when the tick succeeded, 1 when it failed, or when another
                  live process of the instance holds its Lease (--wait-for-lease to wait for it)
  recond diff     read, observe and diff; exit 0 no difference, 1 differences, 2 error
  recond trigger  ask a running recond for a tick now (--url, --token-file; --wait for its outcome)
  recond status   print a running recond's status page as a table (--url)
  recond suspend  stop a running recond from writing, pruning and healing (--url, --token-file,
                  --reason; --for, default --suspend-max): it still reads, diffs and reports
  recond resume   end a suspension (--url, --token-file)
  recond alerts   print the Prometheus alerting rules (--stall-intervals N, --selector, --runbook-base,
                  --prometheus-rule for a PrometheusRule object)
  recond version  print the version

Run "recond <command> -h" for the flags. Every flag can also be set in the
environment as RECOND_<FLAG>, upper case, dashes as underscores
(e.g. RECOND_SELF_HEAL=false).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		// After the first signal, the default action again: a second one
		// ends the process at once instead of waiting for the graceful stop.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "recond %s\n", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "alerts":
		return printAlerts(args, stdout, stderr)
	case "trigger":
		return trigger(ctx, args, stdout, stderr)
	case "status":
		return printStatus(ctx, args, stdout, stderr)
	case "suspend", "resume":
		return suspendCommand(ctx, cmd == "resume", args, stdout, stderr)
	case "run":
		return runCommand(ctx, args, stderr)
	case "sync":
		return syncCommand(ctx, args, stderr)
	case "diff":
		return diffCommand(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "recond: unknown command %q\n\n%s", cmd, usage)
	return 2
}
