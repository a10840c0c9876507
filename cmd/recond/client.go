package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"recond.dev/recond/status"
)

// The commands that print or ask something of a running recond (alerts,
// status, trigger, suspend, resume): their flags, and the HTTP call.

// commandFlags is the flag set of command name, its errors and -h to
// stderr.
func commandFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// urlFlag adds --url, where the running recond listens.
func urlFlag(fs *flag.FlagSet) *string {
	return fs.String("url", "", "recond's --listen address, e.g. http://recond.team-a:8080 (required)")
}

// parseCommand parses args into fs. When not ok, the command ends with
// code: 0 after -h, 2 for a flag it does not take.
func parseCommand(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// call sends req and decodes a JSON answer with status want.
func call(client *http.Client, req *http.Request, want int, into any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// A tick's details are capped well below this (500 changes, their
	// fields at 200 bytes a value).
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %.200s", req.Method, req.URL.Path, resp.Status, status.Printable(strings.TrimSpace(string(body))))
	}
	return json.Unmarshal(body, into)
}
