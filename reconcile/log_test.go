package reconcile_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// A change of 10,000 labels (each with a long value) is one difference
// line of bounded size that says how many fields it left out, not a line
// of hundreds of KB; the tick still applies every label.
func TestDifferenceLineIsCapped(t *testing.T) {
	h := newHarness(t)
	var logs testenv.SyncBuffer
	h.observers = []reconcile.Observer{reconcile.LogObserver{Log: slog.New(slog.NewJSONHandler(&logs, nil))}}
	cm := func(labels string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled\n" + labels + "data:\n  k: v\n"
	}
	h.repo.Commit("cm", map[string]string{"cm.yaml": cm("")})
	h.mustTick(reconcile.OutcomeApplied)

	var labels strings.Builder
	labels.WriteString("  labels:\n")
	for i := range 10000 {
		fmt.Fprintf(&labels, "    label-%05d: %s\n", i, strings.Repeat("v", 60))
	}
	h.repo.Commit("10,000 labels", map[string]string{"cm.yaml": cm(labels.String())})
	h.mustTick(reconcile.OutcomeApplied)
	if got := len(h.get(gvrConfigMap, "labelled").GetLabels()); got < 10000 {
		t.Fatalf("%d labels applied, want 10,000 and recond's own", got)
	}

	var line map[string]any
	var raw string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"difference"`) && strings.Contains(l, "ConfigMap/labelled") {
			raw = l
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil {
		t.Fatalf("no difference line for the ConfigMap:\n%.2000s", logs.String())
	}
	if len(raw) > 2*reconcile.MaxDifferenceBytes {
		t.Errorf("the difference line is %d bytes, want at most about %d", len(raw), reconcile.MaxDifferenceBytes)
	}
	shown := strings.Count(line["diff"].(string), "ConfigMap/labelled metadata.labels")
	more, _ := line["more_fields"].(float64)
	if shown == 0 || shown > reconcile.MaxDifferenceFields || int(more) == 0 {
		t.Errorf("the line shows %d fields and more_fields=%v, want at most %d and the rest counted", shown, line["more_fields"], reconcile.MaxDifferenceFields)
	}
	if total := shown + int(more); total != 10000 && total != 1 {
		t.Errorf("%d fields shown + %d left out = %d, want every label counted", shown, int(more), total)
	}
}
