package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/diff"
)

var (
	hpaKind        = schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	limitRangeKind = schema.GroupVersionKind{Version: "v1", Kind: "LimitRange"}
	serviceKind    = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	secretKind     = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	widgetKind     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetKind     = schema.GroupVersionKind{Group: "recond.dev", Version: "v1", Kind: "Gadget"}
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTypeOfDocuments types fields from documents the API server served
// (trimmed to the kinds used), and hand-made shapes.
func TestTypeOfDocuments(t *testing.T) {
	tests := []struct {
		file string
		gvk  schema.GroupVersionKind
		path string // slash-joined; [] for a list item
		want diff.FieldType
	}{
		{"autoscaling-v2.json", hpaKind, "spec/metrics/[]/external/target/averageValue", diff.FieldQuantity},
		{"autoscaling-v2.json", hpaKind, "spec/metrics/[]/pods/target/averageValue", diff.FieldQuantity},
		{"autoscaling-v2.json", hpaKind, "spec/metrics/[]/object/target/value", diff.FieldQuantity},
		{"autoscaling-v2.json", hpaKind, "spec/metrics/[]/external/target/averageUtilization", diff.FieldPlain},
		{"autoscaling-v2.json", hpaKind, "spec/metrics/[]/external/metric/selector/matchLabels/app", diff.FieldPlain},
		{"autoscaling-v2.json", hpaKind, "spec/maxReplicas", diff.FieldPlain},
		{"autoscaling-v2.json", hpaKind, "metadata/labels/app", diff.FieldPlain},
		{"autoscaling-v2.json", hpaKind, "spec/noSuchField", diff.FieldUnknown},
		{"autoscaling-v2.json", limitRangeKind, "spec/limits/[]/default/cpu", diff.FieldUnknown}, // not this document's kind
		{"core-v1.json", limitRangeKind, "spec/limits/[]/default/cpu", diff.FieldQuantity},
		{"core-v1.json", limitRangeKind, "spec/limits/[]/defaultRequest/memory", diff.FieldQuantity},
		{"core-v1.json", limitRangeKind, "spec/limits/[]/max/cpu", diff.FieldQuantity},
		{"core-v1.json", limitRangeKind, "spec/limits/[]/min/cpu", diff.FieldQuantity},
		{"core-v1.json", limitRangeKind, "spec/limits/[]/maxLimitRequestRatio/cpu", diff.FieldQuantity},
		{"core-v1.json", limitRangeKind, "spec/limits/[]/type", diff.FieldPlain},
		{"core-v1.json", serviceKind, "spec/ports/[]/targetPort", diff.FieldIntOrString},
		{"core-v1.json", serviceKind, "spec/ports/[]/port", diff.FieldPlain},
		{"core-v1.json", secretKind, "data/password", diff.FieldPlain},
		{"example.com-v1.json", widgetKind, "spec/size", diff.FieldQuantity},
		{"example.com-v1.json", widgetKind, "spec/port", diff.FieldIntOrString},
		{"example.com-v1.json", widgetKind, "spec/timeout", diff.FieldDuration},
		{"example.com-v1.json", widgetKind, "metadata/name", diff.FieldPlain},
		{"gadget-v1.json", gadgetKind, "spec/interval", diff.FieldDuration},
		{"gadget-v1.json", gadgetKind, "spec/free/cpu", diff.FieldUnknown},
		{"gadget-v1.json", gadgetKind, "spec/tuple/[]", diff.FieldUnknown},
		{"gadget-v1.json", gadgetKind, "spec/loop/x", diff.FieldUnknown},
		{"gadget-v1.json", gadgetKind, "spec/loop", diff.FieldUnknown},
		{"gadget-v1.json", gadgetKind, "spec/name", diff.FieldPlain},
	}
	docs := map[string]*document{}
	for _, tt := range tests {
		t.Run(tt.file+":"+tt.gvk.Kind+":"+tt.path, func(t *testing.T) {
			d := docs[tt.file]
			if d == nil {
				var err error
				if d, err = parse(readFixture(t, tt.file)); err != nil {
					t.Fatalf("parse %s: %v", tt.file, err)
				}
				docs[tt.file] = d
			}
			got := diff.FieldUnknown
			if root := d.kinds[tt.gvk]; root != nil {
				got = d.typeOf(root, strings.Split(tt.path, "/"))
			}
			if got != tt.want {
				t.Errorf("type of %s %s = %s, want %s", tt.gvk.Kind, tt.path, got, tt.want)
			}
		})
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, src := range []string{`{"components": {"schemas": {"a": {"items": {"properties": 3}}}}}`, `not json`} {
		if _, err := parse([]byte(src)); err == nil {
			t.Errorf("parse(%s) = nil error, want one", src)
		}
	}
}
