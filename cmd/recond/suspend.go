package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"

	"recond.dev/recond/reconcile"
)

// suspendCommand is `recond suspend` and `recond resume`: POST
// /api/v1/suspend or /api/v1/resume to a running recond. It exits 0 when
// done, 2 on any error.
func suspendCommand(ctx context.Context, resume bool, args []string, stdout, stderr io.Writer) int {
	name := "recond suspend"
	if resume {
		name = "recond resume"
	}
	fs := commandFlags(name, stderr)
	url := urlFlag(fs)
	tokenFile := fs.String("token-file", "", "file holding the bearer token (recond's --sync-token-file) (required)")
	by := fs.String("by", defaultAuthor(), "who, as the suspension and its Events name it")
	var reason *string
	var dur *time.Duration
	if !resume {
		reason = fs.String("reason", "", "why, in a few words that whoever finds the loop stopped will read (required)")
		dur = fs.Duration("for", 0, "how long, at least 1s (default: recond's --suspend-max, 24h unless set otherwise); the loop resumes by itself at the end")
	}
	if code, ok := parseCommand(fs, args); !ok {
		return code
	}
	if *url == "" || *tokenFile == "" || fs.NArg() > 0 || !resume && strings.TrimSpace(*reason) == "" {
		req := "--url and --token-file are required"
		if !resume {
			req = "--url, --token-file and --reason are required"
		}
		fmt.Fprintf(stderr, "%s: %s, and it takes no arguments\n", name, req)
		return 2
	}
	forSet := false
	fs.Visit(func(f *flag.Flag) { forSet = forSet || f.Name == "for" })
	if forSet {
		// Given, --for is a length: "--for 0s" is refused, never the
		// maximum.
		if err := reconcile.CheckSuspendFor(*dur); err != nil {
			fmt.Fprintf(stderr, "%s: --for: %v\n", name, err)
			return 2
		}
	}
	var body any = resumeRequest{By: *by}
	path := "/api/v1/resume"
	if !resume {
		r := suspendRequest{Reason: *reason, By: *by}
		if forSet {
			r.For = dur.String()
		}
		body, path = r, "/api/v1/suspend"
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(*url, "/")+path, bytes.NewReader(data))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	req.Header.Set("Content-Type", "application/json")
	token, err := readSecretFile("--token-file", *tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	var ans suspendAnswer
	if err := call(&http.Client{Timeout: 30 * time.Second}, req, http.StatusOK, &ans); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if s := ans.Suspension; s != nil {
		fmt.Fprintf(stdout, "suspended until %s (%s from now) by %s: %s\n", s.Until.Local().Format(time.RFC3339),
			time.Until(s.Until).Round(time.Second), s.By, s.Reason)
	} else {
		fmt.Fprintln(stdout, "resumed: the next tick writes again")
	}
	return 0
}

// defaultAuthor is who runs the command: user@host.
func defaultAuthor() string {
	who := os.Getenv("USER")
	if u, err := user.Current(); who == "" && err == nil {
		who = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		if who == "" {
			return host
		}
		return who + "@" + host
	}
	return who
}
