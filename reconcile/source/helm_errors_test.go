package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"recond.dev/recond/reconcile/source/render"
)

// TestHelmRecursionErrorBounded: a template that includes itself through
// tpl fails after Helm's thousand nested calls; its error (in-process and
// from a worker) says the repeated calls once, how many times they
// repeat, and the innermost cause, in a few kilobytes (not the hundreds
// Helm's text takes).
func TestHelmRecursionErrorBounded(t *testing.T) {
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{
		"prod.yaml":             "{}\n",
		"app/Chart.yaml":        "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/_h.tpl":  "{{- define \"loop\" -}}{{ tpl \"{{ include \\\"loop\\\" . }}\" . }}{{- end -}}",
		"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: {{ include \"loop\" . | quote }}\n",
	})
	for _, w := range []*Worker{nil, testWorker(t)} {
		_, err := mustNew(t, helmConfig(dir, w, nil)).Render(context.Background(), sha)
		var me *ManifestError
		if !errors.As(err, &me) {
			t.Fatalf("worker=%t: Render = %v; want a *ManifestError", w != nil, err)
		}
		text := err.Error()
		if len(text) > render.MaxErrorText+512 {
			t.Errorf("worker=%t: the error is %d bytes long", w != nil, len(text))
		}
		for _, want := range []string{`executing "app/templates/cm.yaml" at <include "loop" .>`, "times more",
			"rendering template has a nested reference name: loop"} {
			if !strings.Contains(text, want) {
				t.Errorf("worker=%t: the error does not say %q:\n%s", w != nil, want, text)
			}
		}
	}
}

// TestHelmSubchartLinkedToDirectory: a subchart that is a symbolic link
// to a directory is refused naming the subchart and saying why, not only
// "is a directory".
func TestHelmSubchartLinkedToDirectory(t *testing.T) {
	files := map[string]string{
		"prod.yaml":                    "{}\n",
		"app/Chart.yaml":               "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n",
		"app/templates/cm.yaml":        cm("c"),
		"shared/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"shared/sub/templates/cm.yaml": cm("s"),
		"shared/other.yaml":            cm("o"),
	}
	for _, c := range []struct {
		name, link, target, file string
		says                     []string
	}{
		{"the subchart's directory", "app/charts/sub", "../../shared/sub", "app/charts/sub",
			[]string{"subchart sub (charts/sub) is a symbolic link to the directory shared/sub", "never to a directory"}},
		{"a packaged subchart", "app/charts/sub.tgz", "../../shared/sub", "app/charts/sub.tgz",
			[]string{"subchart sub (charts/sub.tgz) is a symbolic link to the directory shared/sub"}},
		{"charts itself", "app/charts", "../shared", "app/charts",
			[]string{"charts, the directory of its subcharts, is a symbolic link to the directory shared"}},
		{"a template directory", "app/templates/more", "../../shared", "app/templates/more",
			[]string{"templates/more is a symbolic link to the directory shared"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sha := commitLinks(t, newTestRepo(t, dir), files, map[string]string{c.link: c.target})
			for _, w := range []*Worker{nil, testWorker(t)} {
				_, err := mustNew(t, helmConfig(dir, w, nil)).Render(context.Background(), sha)
				var me *ManifestError
				if !errors.As(err, &me) || me.File != c.file {
					t.Fatalf("worker=%t: Render = %v; want a *ManifestError of %s", w != nil, err, c.file)
				}
				for _, s := range c.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("worker=%t: the error does not say %q: %v", w != nil, s, err)
					}
				}
			}
		})
	}
}
