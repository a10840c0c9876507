package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/deploy"
)

// monitoring/dashboards.yaml holds one ConfigMap per dashboards/*.json,
// labelled for Grafana's sidecar, whose data is that file byte for byte; and
// it is exactly what go run ./deploy/gen writes (so make verify stays clean).
func TestDashboardConfigMapsAreCurrent(t *testing.T) {
	const stale = "deploy/monitoring/dashboards.yaml is stale: run make generate (go run ./deploy/gen)"
	paths, err := filepath.Glob("../dashboards/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dashboards/*.json: %v", err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if files[filepath.Base(p)], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile("monitoring/dashboards.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeYAML(committed)
	if err != nil {
		t.Fatalf("monitoring/dashboards.yaml: %v", err)
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			t.Errorf("monitoring/dashboards.yaml holds a %s", o.GetKind())
		}
		byName[o.GetName()] = o
	}
	if len(byName) != len(files) {
		t.Errorf("%d ConfigMaps for %d dashboards: %s", len(byName), len(files), stale)
	}
	for file, want := range files {
		cm := byName[deploy.DashboardConfigMapName(file)]
		if cm == nil {
			t.Errorf("no ConfigMap %s for dashboards/%s: %s", deploy.DashboardConfigMapName(file), file, stale)
			continue
		}
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s: labels %v, want grafana_dashboard: \"1\"", cm.GetName(), cm.GetLabels())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if len(data) != 1 || data[file] != string(want) {
			t.Errorf("ConfigMap %s does not hold dashboards/%s as it is: %s", cm.GetName(), file, stale)
		}
	}
	gen, err := deploy.DashboardConfigMaps(files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen, committed) {
		t.Error(stale)
	}
	// The monitoring kustomization includes them.
	mon := render(t, "monitoring").Objects
	for _, o := range objs {
		find(t, mon, "ConfigMap", o.GetName())
	}
}

// DashboardConfigMaps keeps any content exactly, trailing newlines included.
func TestDashboardConfigMapsRoundTrip(t *testing.T) {
	for _, content := range []string{
		"{\n  \"a\": 1\n}\n",
		"{\"a\": 1}",
		"{\n\n  \"b\": \"x: y # z\"\n}\n\n",
		"[\n  \"  leading and trailing spaces  \"\n]\n",
	} {
		out, err := deploy.DashboardConfigMaps(map[string][]byte{"recond-x.json": []byte(content)})
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeYAML(out)
		if err != nil || len(objs) != 1 {
			t.Fatalf("%q: %v\n%s", content, err, out)
		}
		got, _, _ := unstructured.NestedString(objs[0].Object, "data", "recond-x.json")
		if got != content {
			t.Errorf("round trip of %q gave %q:\n%s", content, got, out)
		}
	}
	for _, bad := range []string{"", "\t{}", " {}"} {
		if _, err := deploy.DashboardConfigMaps(map[string][]byte{"recond-x.json": []byte(bad)}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
