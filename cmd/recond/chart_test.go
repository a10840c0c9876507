package main

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// A chart whose templates call a random function needs the instance's
// seed: `recond diff` and `--dry-run` never make it (they write nothing)
// and say so; `recond sync` makes it, and `recond diff` then reads it and
// finds nothing to change.
func TestChartSeedOnlyMadeByWritingCommands(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("chart", map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: {{ randAlphaNum 16 | quote }}\n",
	})
	args := clusterArgs(t, repo.URL())
	ns := args[3]
	seedExists := func() bool {
		t.Helper()
		_, err := cp.Client.CoreV1().Secrets(ns).Get(context.Background(), "recond-seed-recond", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	for _, cmd := range [][]string{{"diff"}, {"sync", "--dry-run"}} {
		code, _, stderr := recond(t, append(cmd, args...)...)
		if code == 0 || !strings.Contains(stderr, "does not exist yet") || seedExists() {
			t.Fatalf("%v before any sync: exit %d, seed made %t; want a failure that says the seed does not exist yet, and no Secret", cmd, code, seedExists())
		}
	}
	if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 0 || !seedExists() {
		t.Fatalf("sync: exit %d, seed made %t; want 0 and the seed Secret", code, seedExists())
	}
	if code, out, _ := recond(t, append([]string{"diff"}, args...)...); code != 0 || out != "" {
		t.Errorf("diff after sync: exit %d, output %q; want 0 and nothing (the same password)", code, out)
	}
}
