package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"recond.dev/recond/status"
)

// printStatus is `recond status`: a running recond's status page as a
// table in a terminal (GET /api/v1/status).
func printStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("recond status", stderr)
	url := urlFlag(fs)
	if code, ok := parseCommand(fs, args); !ok {
		return code
	}
	if *url == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "recond status: --url is required, and takes no arguments")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := status.Fetch(ctx, *url)
	if err != nil {
		fmt.Fprintf(stderr, "recond status: %v\n", err)
		return 2
	}
	if err := status.WriteTable(stdout, s); err != nil {
		fmt.Fprintf(stderr, "recond status: %v\n", err)
		return 2
	}
	return 0
}
