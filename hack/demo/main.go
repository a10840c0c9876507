// Command demo shows recond holding a namespace: it starts a local
// kube-apiserver and etcd, makes a Git repository from the example app, runs
// `recond run` against them, then drifts the cluster and commits to Git while
// recond runs, so that its log shows a first sync, a heal, an update, a
// prune and a refused hostile commit. It stops everything it started.
//
// The demo is a table of steps (steps), each a function that says what it
// shows and checks that it happened; demo walks them in order.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"k8s.io/client-go/kubernetes"
)

func main() {
	var o options
	flag.StringVar(&o.recondBin, "recond", "bin/recond", "recond binary")
	flag.StringVar(&o.examples, "examples", "examples/demo-app", "manifests to put in the repository")
	flag.StringVar(&o.chart, "chart", "examples/demo-chart", "a Helm chart to put in a second repository")
	flag.StringVar(&o.sops, "sops", "examples/demo-sops", "SOPS-encrypted values for the chart, and the demo's age key")
	flag.DurationVar(&o.interval, "interval", 4*time.Second, "recond's --interval")
	flag.Parse()
	if err := demo(o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// options are the demo's flags.
type options struct {
	recondBin, examples, chart, sops string
	interval                         time.Duration
}

// session is what the steps share: the flags, the control plane, the
// demo's files and the `recond run` the first steps start.
type session struct {
	options
	ctx context.Context
	cs  kubernetes.Interface
	// kubeconfigData is the control plane's kubeconfig, written to
	// kubeconfig in work.
	kubeconfigData []byte
	// work holds the repository, recond's cache, the kubeconfig and the
	// sync token.
	work, kubeconfig, tokenFile string
	repoDir                     string
	repo                        *demoRepo
	// run is `recond run`; ticks are the tick lines of its log, addr is
	// where it listens.
	run   *exec.Cmd
	ticks chan string
	addr  string
	// stops undo what the steps started, the last first.
	stops []func()
}

// steps are the demo, in order: each says what it shows, makes it happen
// and prints what recond did.
var steps = []func(*session) error{
	startControlPlane,
	makeRepository,
	startRecond,
	firstSync,
	footprint,
	rollOut,
	drift,
	imageBump,
	degraded,
	recovered,
	prune,
	hostileCommit,
	runawayRender,
	triggerAndWait,
	suspend,
	status,
	resume,
	optOut,
	eventsPerTransition,
	liveness,
	crash,
	chartStep,
	ociStep,
	done,
}

// demo runs the steps until one fails, then stops what they started.
func demo(o options) error {
	s := &session{options: o, ctx: context.Background()}
	defer func() {
		for i := len(s.stops) - 1; i >= 0; i-- {
			s.stops[i]()
		}
	}()
	for _, step := range steps {
		if err := step(s); err != nil {
			return err
		}
	}
	return nil
}

// onStop registers f to run when the demo ends.
func (s *session) onStop(f func()) { s.stops = append(s.stops, f) }
