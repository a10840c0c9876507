package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/status"
)

// trigger is `recond trigger`: POST /api/v1/sync to a running recond and,
// with --wait, wait for the tick it answers with. It exits 0 when the tick
// was asked for (and, with --wait, succeeded), 1 when the tick failed or did
// not end within --timeout, 2 on any other error.
func trigger(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("recond trigger", stderr)
	url := urlFlag(fs)
	tokenFile := fs.String("token-file", "", "file holding the bearer token (recond's --sync-token-file)")
	wait := fs.Bool("wait", false, "wait for the tick to end; exit 1 when it failed")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long --wait waits")
	if code, ok := parseCommand(fs, args); !ok {
		return code
	}
	if *url == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "recond trigger: --url is required, and takes no arguments")
		return 2
	}
	base := strings.TrimRight(*url, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/sync", nil)
	if err != nil {
		fmt.Fprintf(stderr, "recond trigger: %v\n", err)
		return 2
	}
	if *tokenFile != "" {
		token, err := readSecretFile("--token-file", *tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "recond trigger: %v\n", err)
			return 2
		}
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	var ans syncAnswer
	if err := call(client, req, http.StatusAccepted, &ans); err != nil {
		fmt.Fprintf(stderr, "recond trigger: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "tick %d requested\n", ans.Tick)
	if !*wait {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/ticks/%d", base, ans.Tick), nil)
		var ts status.TickState
		err := call(client, req, http.StatusOK, &ts)
		switch {
		case err == nil && ts.State == status.StateDone && ts.Tick != nil:
			t := ts.Tick
			line := fmt.Sprintf("tick %d: %s at revision %s in %.1fs", t.ID, t.Outcome, revision.Abbrev(t.Revision, 12), t.DurationSeconds)
			if t.Health != "" {
				line += ", health " + t.Health
			}
			if f := t.Failure; f != nil {
				line += fmt.Sprintf(": %s failed (%s): %s", f.Phase, f.Reason, f.Message)
			}
			// Remote text: no escape sequence reaches the terminal.
			fmt.Fprintln(stdout, status.Printable(line))
			if t.Failure != nil {
				return 1
			}
			return 0
		case err == nil && ts.State == status.StateExpired:
			fmt.Fprintf(stderr, "recond trigger: tick %d ended, but recond no longer remembers it\n", ans.Tick)
			return 1
		case ctx.Err() != nil:
			fmt.Fprintf(stderr, "recond trigger: tick %d did not end within %s\n", ans.Tick, *timeout)
			return 1
		case err != nil:
			fmt.Fprintf(stderr, "recond trigger: %v (retrying)\n", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
