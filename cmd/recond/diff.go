package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
)

// diffCommand is `recond diff`: read, observe and diff, and print the
// changes a tick would make. It exits 0 with no difference, 1 with
// differences, 2 on any error.
func diffCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return withApp("diff", args, stderr, func(a *app) int { return a.diff(ctx, stdout) })
}

// buildDiff adds nothing but the reconciler: recond diff campaigns for no
// Lease, sends no Event, watches nothing and serves nothing.
func (a *app) buildDiff(p *parts) error {
	p.reconciler(a)
	return nil
}

// diffJSON is the shape of `recond diff --output json`.
type diffJSON struct {
	Revision string       `json:"revision"`
	Changes  []changeJSON `json:"changes"`
	// Skipped are the objects a per-object opt-out holds back.
	Skipped []reconcile.Skip `json:"skipped,omitempty"`
	// Hooks are what each of the revision's chart hooks would create and
	// delete, and what the write gate would refuse.
	Hooks []reconcile.HookPlan `json:"hooks,omitempty"`
}

type changeJSON struct {
	Kind   string           `json:"kind"`
	Name   string           `json:"name"`
	Action diff.Action      `json:"action"`
	Fields []diff.FieldDiff `json:"fields,omitempty"`
}

func (a *app) diff(ctx context.Context, stdout io.Writer) int {
	defer a.flush()
	tctx, cancel := context.WithTimeout(ctx, a.opts.tickTimeout)
	defer cancel()
	r := a.rec.Plan(tctx)
	if f := r.Failure(); f != nil {
		return 2
	}
	if a.opts.output == "json" {
		out := diffJSON{Revision: r.Revision, Changes: []changeJSON{}, Skipped: r.Skipped, Hooks: r.Hooks}
		for _, c := range r.Changes {
			out.Changes = append(out.Changes, changeJSON{Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: c.Fields})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return 2
		}
	} else {
		for _, c := range r.Changes {
			fmt.Fprintln(stdout, strings.TrimRight(c.String(), "\n"))
		}
		for _, s := range r.Skipped {
			fmt.Fprintln(stdout, "skipped "+s.String())
		}
		for _, h := range r.Hooks {
			fmt.Fprintln(stdout, h.String())
		}
	}
	if len(r.Changes) > 0 {
		return 1
	}
	return 0
}
