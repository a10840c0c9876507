package diff

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeTypes answers from a table keyed by kind and slash-joined path, and
// records every path it is asked about.
type fakeTypes struct {
	kinds map[schema.GroupVersionKind]map[string]FieldType
	asked []string
}

func (f *fakeTypes) TypeOf(gvk schema.GroupVersionKind, path []string) FieldType {
	p := strings.Join(path, "/")
	f.asked = append(f.asked, p)
	return f.kinds[gvk][p]
}

var (
	hpaKind        = schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	limitRangeKind = schema.GroupVersionKind{Version: "v1", Kind: "LimitRange"}
	widgetKind     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
)

// serverTypes is what the API server's schema says about the fields the
// tests use.
func serverTypes() *fakeTypes {
	return &fakeTypes{kinds: map[schema.GroupVersionKind]map[string]FieldType{
		hpaKind: {
			"spec/metrics/[]/external/target/averageValue": FieldQuantity,
			"spec/metrics/[]/external/target/type":         FieldPlain,
			"spec/metrics/[]/external/metric/name":         FieldPlain,
			"spec/metrics/[]/type":                         FieldPlain,
			"spec/maxReplicas":                             FieldPlain,
		},
		limitRangeKind: {
			"spec/limits/[]/default/cpu":        FieldQuantity,
			"spec/limits/[]/default/memory":     FieldQuantity,
			"spec/limits/[]/defaultRequest/cpu": FieldQuantity,
			"spec/limits/[]/max/cpu":            FieldQuantity,
			"spec/limits/[]/type":               FieldPlain,
		},
		widgetKind: {
			"spec/size":          FieldQuantity,
			"spec/port":          FieldIntOrString,
			"spec/timeout":       FieldDuration,
			"spec/limits/cpu":    FieldPlain, // a plain string despite its name
			"spec/ports/[]/port": FieldIntOrString,
		},
	}}
}

const (
	hpaYAML = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  maxReplicas: 10
  metrics:
  - type: External
    external:
      metric: {name: queue}
      target: {type: AverageValue, averageValue: %s}
`
	limitRangeYAML = `apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: shop}
spec:
  limits:
  - type: Container
    default: {cpu: %s, memory: 1Gi}
`
	widgetYAML = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: shop}
spec: {%s: %s}
`
)

func TestObjectFieldTypes(t *testing.T) {
	sprintf := func(format string, a ...any) string {
		for _, v := range a {
			format = strings.Replace(format, "%s", v.(string), 1)
		}
		return format
	}
	tests := []struct {
		name          string
		desired, live string
		types         bool // use serverTypes; else Types is nil
		want          Action
		fields        []FieldDiff
	}{
		{
			name:    "hpa averageValue number against the canonical string",
			desired: sprintf(hpaYAML, "2"), live: sprintf(hpaYAML, `"2"`),
			types: true, want: Unchanged,
		},
		{
			name:    "without a schema the same averageValue is a perpetual difference",
			desired: sprintf(hpaYAML, "2"), live: sprintf(hpaYAML, `"2"`),
			want: Update,
			fields: []FieldDiff{{
				Path: "spec.metrics[0].external.target.averageValue", Live: "2", Desired: float64(2),
			}},
		},
		{
			name:    "hpa averageValue 30k against 30000",
			desired: sprintf(hpaYAML, `"30k"`), live: sprintf(hpaYAML, `"30000"`),
			types: true, want: Unchanged,
		},
		{
			name:    "hpa averageValue really changed",
			desired: sprintf(hpaYAML, `"30k"`), live: sprintf(hpaYAML, `"20k"`),
			types: true, want: Update,
			fields: []FieldDiff{{
				Path: "spec.metrics[0].external.target.averageValue", Live: "20k", Desired: "30k",
			}},
		},
		{
			name:    "limitrange default cpu 0.5 against 500m",
			desired: sprintf(limitRangeYAML, "0.5"), live: sprintf(limitRangeYAML, "500m"),
			types: true, want: Unchanged,
		},
		{
			name:    "limitrange default cpu without a schema",
			desired: sprintf(limitRangeYAML, "0.5"), live: sprintf(limitRangeYAML, "500m"),
			want: Update,
			fields: []FieldDiff{{
				Path: "spec.limits[0].default.cpu", Live: "500m", Desired: 0.5,
			}},
		},
		{
			name:    "int-or-string number and string of the same digits differ",
			desired: sprintf(widgetYAML, "port", "80"), live: sprintf(widgetYAML, "port", `"80"`),
			types: true, want: Update,
			fields: []FieldDiff{{Path: "spec.port", Live: "80", Desired: float64(80)}},
		},
		{
			name:    "int-or-string numbers compare numerically",
			desired: sprintf(widgetYAML, "port", "80"), live: sprintf(widgetYAML, "port", "80"),
			types: true, want: Unchanged,
		},
		{
			name:    "int-or-string strings compare exactly",
			desired: sprintf(widgetYAML, "port", "http"), live: sprintf(widgetYAML, "port", "https"),
			types: true, want: Update,
			fields: []FieldDiff{{Path: "spec.port", Live: "https", Desired: "http"}},
		},
		{
			name:    "int-or-string quantity of a custom resource",
			desired: sprintf(widgetYAML, "size", "1Gi"), live: sprintf(widgetYAML, "size", "1024Mi"),
			types: true, want: Unchanged,
		},
		{
			name:    "duration 1m equals 60s",
			desired: sprintf(widgetYAML, "timeout", "1m"), live: sprintf(widgetYAML, "timeout", "60s"),
			types: true, want: Unchanged,
		},
		{
			name:    "duration changed",
			desired: sprintf(widgetYAML, "timeout", "1m"), live: sprintf(widgetYAML, "timeout", "2m"),
			types: true, want: Update,
			fields: []FieldDiff{{Path: "spec.timeout", Live: "2m", Desired: "1m"}},
		},
		{
			name:    "duration without a schema compares exactly",
			desired: sprintf(widgetYAML, "timeout", "1m"), live: sprintf(widgetYAML, "timeout", "60s"),
			want:   Update,
			fields: []FieldDiff{{Path: "spec.timeout", Live: "60s", Desired: "1m"}},
		},
		{
			name:    "the schema's plain type wins over the name limits",
			desired: sprintf(widgetYAML, "limits", "{cpu: '1'}"), live: sprintf(widgetYAML, "limits", "{cpu: '1000m'}"),
			types: true, want: Update,
			fields: []FieldDiff{{Path: "spec.limits.cpu", Live: "1000m", Desired: "1"}},
		},
		{
			name:    "the name limits without a schema is a quantity",
			desired: sprintf(widgetYAML, "limits", "{cpu: '1'}"), live: sprintf(widgetYAML, "limits", "{cpu: '1000m'}"),
			want: Unchanged,
		},
		{
			name:    "a kind the schema does not know keeps the name rules",
			desired: fixture(t, "deployment.yaml"), live: fixture(t, "deployment-live.yaml"),
			types: true, want: Unchanged,
		},
		{
			name:    "list items keyed by field",
			desired: sprintf(widgetYAML, "ports", "[{name: a, port: 80}]"), live: sprintf(widgetYAML, "ports", `[{name: a, port: "80"}]`),
			types: true, want: Update,
			fields: []FieldDiff{{Path: "spec.ports[name=a].port", Live: "80", Desired: float64(80)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := recondOpts
			if tt.types {
				opts.Types = serverTypes()
			}
			got := Object(desiredObj(t, tt.desired), liveObj(t, tt.live), opts)
			if got.Action != tt.want {
				t.Errorf("Action = %q, want %q; change:\n%s", got.Action, tt.want, got)
			}
			if !reflect.DeepEqual(got.Fields, tt.fields) {
				t.Errorf("Fields mismatch (-want +got):\n%s", fieldsDiff(tt.fields, got.Fields))
			}
		})
	}
}

// TestObjectAsksByPath checks the paths the comparison asks about: map keys
// as they are, list items as Item.
func TestObjectAsksByPath(t *testing.T) {
	types := serverTypes()
	opts := recondOpts
	opts.Types = types
	Object(desiredObj(t, strings.Replace(limitRangeYAML, "%s", "0.5", 1)),
		liveObj(t, strings.Replace(limitRangeYAML, "%s", "500m", 1)), opts)
	want := []string{"spec/limits/[]/default/cpu", "spec/limits/[]/default/memory", "spec/limits/[]/type"}
	var got []string
	for _, p := range types.asked {
		if strings.HasPrefix(p, "spec/") {
			got = append(got, p)
		}
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("asked %q, want among them %q", got, w)
		}
	}
}

func TestEquivalentFieldTypes(t *testing.T) {
	tests := []struct {
		name         string
		dryRun, live string
		want         []FieldDiff
	}{
		{
			name:   "duration by value",
			dryRun: strings.Replace(strings.Replace(widgetYAML, "%s", "timeout", 1), "%s", "1m0s", 1),
			live:   strings.Replace(strings.Replace(widgetYAML, "%s", "timeout", 1), "%s", "60s", 1),
		},
		{
			name:   "quantity by value",
			dryRun: strings.Replace(hpaYAML, "%s", "30k", 1),
			live:   strings.Replace(hpaYAML, "%s", "30000", 1),
		},
		{
			name:   "int-or-string keeps its type",
			dryRun: strings.Replace(strings.Replace(widgetYAML, "%s", "port", 1), "%s", "80", 1),
			live:   strings.Replace(strings.Replace(widgetYAML, "%s", "port", 1), "%s", `"80"`, 1),
			want:   []FieldDiff{{Path: "spec.port", Live: "80", Desired: int64(80)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := recondOpts
			opts.Types = serverTypes()
			got := Equivalent(liveObj(t, tt.dryRun), liveObj(t, tt.live), opts)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Equivalent mismatch (-want +got):\n%s", fieldsDiff(tt.want, got))
			}
		})
	}
}
