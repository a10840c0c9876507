package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// maxStatusBytes bounds the answer Fetch reads.
const maxStatusBytes = 16 << 20

// Fetch reads the status of the recond serving at base (its --listen
// address, e.g. http://recond:8080; a URL that already ends in
// /api/v1/status is used as it is).
func Fetch(ctx context.Context, base string) (*Status, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("status url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("status url %q: want http or https", u.Redacted())
	}
	if !strings.HasSuffix(u.Path, "/api/v1/status") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/status"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("status request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get status: %w", err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxStatusBytes)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(body, 512))
		return nil, fmt.Errorf("get %s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(msg)))
	}
	var s Status
	if err := json.NewDecoder(body).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode status from %s: %w", u.Redacted(), err)
	}
	if s.Schema != SchemaVersion {
		return nil, fmt.Errorf("status from %s: schema %q, want %q", u.Redacted(), s.Schema, SchemaVersion)
	}
	return &s, nil
}

// WriteTable writes s for a terminal: the instance, the ticks (newest
// first) and the page of objects s holds. Relative times count from
// s.Generated.
func WriteTable(w io.Writer, s *Status) error {
	if s == nil {
		return errors.New("write status table: no status")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ago := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		d := s.Generated.Sub(*t)
		if d <= 0 {
			return t.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), relative(d))
	}
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	next := "at start"
	switch {
	case s.Progress.Running:
		next = fmt.Sprintf("tick %d running", s.Progress.Started)
	case s.NextTick != nil:
		next = s.NextTick.UTC().Format(time.RFC3339) + " (about)"
	}
	fmt.Fprintf(tw, "NAMESPACE\t%s\n", s.Namespace)
	fmt.Fprintf(tw, "INSTANCE\t%s\n", s.Instance)
	fmt.Fprintf(tw, "REPOSITORY\t%s\n", s.Repo)
	fmt.Fprintf(tw, "REF\t%s\n", s.Ref)
	if s.Path != "" {
		fmt.Fprintf(tw, "PATH\t%s\n", s.Path)
	}
	if c := s.Chart; c != nil {
		values := ""
		if len(c.Values) > 0 {
			values = " (values " + strings.Join(c.Values, ", ") + ")"
		}
		fmt.Fprintf(tw, "CHART\t%s %s%s\n", c.Name, c.Version, values)
	}
	if sus := s.Suspension; sus != nil {
		fmt.Fprintf(tw, "SUSPENDED\tuntil %s (%s left) by %s: %s\n", sus.Until.UTC().Format(time.RFC3339),
			time.Duration(sus.RemainingSeconds*float64(time.Second)), Printable(sus.By), Printable(sus.Reason))
	}
	applied := "applied " + or(s.AppliedRevision, "none")
	if s.AppliedRevision != "" && s.AppliedRevision == s.Revision {
		applied = "applied"
	}
	fmt.Fprintf(tw, "REVISION\t%s (%s)\n", or(s.Revision, "none"), applied)
	fmt.Fprintf(tw, "OBSERVE\t%s\n", s.Observe)
	fmt.Fprintf(tw, "INTERVAL\t%s\n", time.Duration(s.IntervalSeconds*float64(time.Second)))
	fmt.Fprintf(tw, "HEALTH\t%s\n", or(s.Health, "not assessed yet"))
	fmt.Fprintf(tw, "LAST SUCCESS\t%s\n", ago(s.LastSuccess))
	fmt.Fprintf(tw, "NEXT TICK\t%s\n", next)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status table: %w", err)
	}

	fmt.Fprintf(w, "\nTICKS (%d, newest first)\n", len(s.Ticks))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tDURATION\tTRIGGER\tOUTCOME\tREVISION\tDRIFTED\tCREATED\tUPDATED\tPRUNED\tFAILURE")
	for _, t := range s.Ticks {
		failure := ""
		if f := t.Failure; f != nil {
			failure = cut(oneLine(f.Message), maxSummary)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", t.ID, t.Start.UTC().Format(time.RFC3339),
			formatDuration(time.Duration(t.DurationSeconds*float64(time.Second))), t.Trigger, t.Outcome,
			or(short(t.Revision), "-"), t.Counts.Drifted, t.Counts.Created, t.Counts.Updated, t.Counts.Pruned, failure)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status table: %w", err)
	}

	o := s.Objects
	from, to := 0, 0
	if len(o.Items) > 0 {
		from = (o.Page-1)*o.PerPage + 1
		to = from + len(o.Items) - 1
	}
	fmt.Fprintf(w, "\nOBJECTS (%d-%d of %d, page %d of %d)\n", from, to, o.Total, o.Page, o.Pages)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tREVISION\tHEALTH\tLAST CHANGE\tMESSAGE")
	for _, obj := range o.Items {
		changed := "-"
		if obj.Changed != nil {
			changed = obj.Changed.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", obj.Kind, obj.Name, or(short(obj.Revision), "-"), obj.Health,
			changed, oneLine(obj.Message))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status table: %w", err)
	}
	return nil
}

// oneLine keeps a message on one line of the table: a line break or a tab
// becomes a space, and any other control character (an ANSI escape in a
// status message some controller wrote) is dropped, so that remote text
// cannot drive the operator's terminal.
func oneLine(s string) string {
	return Printable(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s))
}

// Printable drops the control characters of s.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}
