package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// repeatableChart is a chart whose ConfigMap "funcs" calls every function
// that Sprig makes depend on Go's map order, the clock or the process's
// time zone, and whose Secret "tls" (a generated certificate and an
// ordinary password) is hashed into ConfigMap "app"'s checksum annotation.
func repeatableChart(password string) map[string]string {
	return map[string]string{
		"prod.yaml":      "{}\n", // helmConfig's values file
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/values.yaml": "password: " + password + "\nm: {k01: 1, k02: 2, k03: 3, k04: 4, k05: 5, k06: 6, k07: 7, k08: 8, k09: 9, " +
			"k10: 10, k11: 11, k12: 12, k13: 13, k14: 14, k15: 15, k16: 16, k17: 17, k18: 18, k19: 19, k20: 20}\n",
		"app/templates/funcs.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: funcs
data:
  keys: {{ keys .Values.m | join "," | quote }}
  keys2: {{ keys .Values.m (dict "b" 1 "a" 2) | join "," | quote }}
  values: {{ values .Values.m | toJson | quote }}
  ago: {{ ago (toDate "2006-01-02" "2023-11-14") | quote }}
  agoNothing: {{ ago "" | quote }}
  date: {{ date "2006-01-02 15:04" "" | quote }}
  dateLocal: {{ dateInZone "15:04 MST" (toDate "2006-01-02 15:04" "2023-11-14 08:00") "Local" | quote }}
  htmlDate: {{ htmlDate 86400 | quote }}
  htmlDateNothing: {{ htmlDate "" | quote }}
  durationRound: {{ durationRound (toDate "2006-01-02" "2023-11-12") | quote }}
  durationRoundString: {{ durationRound "2h5m" | quote }}
  mustToDate: {{ mustToDate "2006-01-02" "2023-11-14" | unixEpoch | quote }}
`,
		"app/templates/secret.yaml": `{{- $ca := genCA "shop-ca" 365 }}
apiVersion: v1
kind: Secret
metadata:
  name: tls
stringData:
  tls.crt: {{ $ca.Cert | quote }}
  password: {{ .Values.password | quote }}
`,
		"app/templates/app.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
data:
  k: v
`,
	}
}

// TestHelmFuncsRepeatable: the functions that list a map do so in sorted
// order, and the time functions measure to the commit's time in UTC, in
// every render (in-process, in a worker, with the key makers' stand-ins):
// the ConfigMap that calls them is the same in each, and is not taken for
// generated-once. Each fails with Sprig's own function.
func TestHelmFuncsRepeatable(t *testing.T) {
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(repeatableChart("p1")) // committed at 1_700_000_060: 2023-11-14T22:14:20Z
	var keys, values []string
	for i := 1; i <= 20; i++ {
		keys, values = append(keys, fmt.Sprintf("k%02d", i)), append(values, strconv.Itoa(i))
	}
	want := map[string]any{
		"keys":                strings.Join(keys, ","),
		"keys2":               strings.Join(keys, ",") + ",a,b",
		"values":              "[" + strings.Join(values, ",") + "]",
		"ago":                 "22h14m20s",
		"agoNothing":          "0s",
		"date":                "2023-11-14 22:14",
		"dateLocal":           "08:00 UTC",
		"htmlDate":            "1970-01-02",
		"htmlDateNothing":     "2023-11-14",
		"durationRound":       "2d",
		"durationRoundString": "2h",
		"mustToDate":          "1699920000",
	}
	// A process's time zone never shows (UTC+14 here, in-process).
	local := time.Local
	time.Local = time.FixedZone("LINT", 14*3600)
	t.Cleanup(func() { time.Local = local })
	for _, worker := range []*Worker{nil, testWorker(t)} {
		for range 3 {
			ms, err := mustNew(t, helmConfig(dir, worker, nil)).Render(context.Background(), sha)
			if err != nil {
				t.Fatal(err)
			}
			got := byName(t, ms)
			f := got["ConfigMap/funcs"]
			if d := cmp.Diff(want, f.Object.Object["data"]); d != "" {
				t.Fatalf("worker=%t: ConfigMap funcs (-want +got):\n%s", worker != nil, d)
			}
			if f.Generated != nil {
				t.Errorf("worker=%t: ConfigMap funcs is taken for generated-once: %v", worker != nil, f.Generated)
			}
		}
	}
}

// TestHelmGeneratedInputs: a generated-once field records a fingerprint of
// what it is made from besides the key makers, the same in every render of
// the same inputs (in-process, in a worker; a key maker added elsewhere in
// the chart), and another one when an ordinary input of the field changes
// (the password hashed into the checksum annotation): the diff then writes
// the field again (GeneratedInputsChanged), and keeps the certificate.
func TestHelmGeneratedInputs(t *testing.T) {
	dir := t.TempDir()
	repo := newTestRepo(t, dir)
	first := repo.commit(repeatableChart("p1"))
	more := repeatableChart("p1")
	more["app/templates/webhook.yaml"] = "{{- $ca := genCA \"other-ca\" 30 }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: another\n" +
		"stringData:\n  tls.crt: {{ $ca.Cert | quote }}\n"
	moreCAs := repo.commit(more)
	changed := repo.commit(repeatableChart("p2"))

	render := func(worker *Worker, sha string) map[string]Manifest {
		t.Helper()
		ms, err := mustNew(t, helmConfig(dir, worker, nil)).Render(context.Background(), sha)
		if err != nil {
			t.Fatal(err)
		}
		return byName(t, ms)
	}
	inputs := func(m Manifest) map[string]string { return m.Object.GetAnnotations() }
	certPath := []string{"stringData", "tls.crt"}
	checksumPath := []string{"metadata", "annotations", "checksum/secret"}

	a := render(nil, first)
	for k, want := range map[string][][]string{"Secret/tls": {certPath}, "ConfigMap/app": {checksumPath}} {
		if d := cmp.Diff(want, a[k].Generated); d != "" {
			t.Fatalf("%s: generated fields (-want +got):\n%s", k, d)
		}
		if inputs(a[k])[AnnotationGeneratedInputs] == "" {
			t.Fatalf("%s has no %s", k, AnnotationGeneratedInputs)
		}
	}
	if _, ok := inputs(a["ConfigMap/funcs"])[AnnotationGeneratedInputs]; ok {
		t.Errorf("ConfigMap funcs, which nothing generated reaches, records generated inputs")
	}
	for name, other := range map[string]map[string]Manifest{
		"a render in a worker":           render(testWorker(t), first),
		"a key maker added in the chart": render(nil, moreCAs),
		"a second in-process render":     render(nil, first),
	} {
		for _, k := range []string{"Secret/tls", "ConfigMap/app"} {
			if d := cmp.Diff(inputs(a[k])[AnnotationGeneratedInputs], inputs(other[k])[AnnotationGeneratedInputs]); d != "" {
				t.Errorf("%s: %s records other inputs (-first +other):\n%s", name, k, d)
			}
		}
	}
	b := render(nil, changed)
	for _, c := range []struct {
		key     string
		path    []string
		changed bool
	}{
		{"Secret/tls", certPath, false},
		{"ConfigMap/app", checksumPath, true},
	} {
		if got := GeneratedInputsChanged(inputs(b[c.key]), inputs(a[c.key]), c.path); got != c.changed {
			t.Errorf("%s %v: GeneratedInputsChanged after a new password = %t, want %t", c.key, c.path, got, c.changed)
		}
	}
	// An object applied before the fingerprints were recorded keeps its
	// fields.
	if GeneratedInputsChanged(inputs(b["ConfigMap/app"]), map[string]string{}, checksumPath) {
		t.Error("a live object without a record is made again")
	}
}

// TestHelmGeneratedInputsKeyed: with SOPS-encrypted values, a generated
// field's fingerprint is keyed with the instance's seed (a short decrypted
// password could be tried against a plain hash): the render asks for the
// seed, and another seed gives another fingerprint.
func TestHelmGeneratedInputsKeyed(t *testing.T) {
	values, err := os.ReadFile("../../examples/demo-sops/secrets-prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join("..", "..", "examples", "demo-sops", "age.agekey")
	dir := t.TempDir()
	files := repeatableChart("p1")
	files["app/templates/app.yaml"] = strings.Replace(files["app/templates/app.yaml"], "data:\n  k: v\n",
		"data:\n  k: v\n  key: {{ .Values.apiKey | sha256sum | quote }}\n", 1)
	files["secrets.yaml"] = string(values)
	sha := newTestRepo(t, dir).commit(files)
	render := func(seed []byte) (map[string]Manifest, error) {
		cfg := helmConfig(dir, nil, seed)
		cfg.Helm.Values, cfg.SOPSAgeKeysFile = []string{"secrets.yaml"}, keysFile
		ms, err := mustNew(t, cfg).Render(context.Background(), sha)
		if err != nil {
			return nil, err
		}
		return byName(t, ms), nil
	}
	if _, err := render(nil); !errors.Is(err, ErrNoSeed) {
		t.Fatalf("render without a seed: %v; want ErrNoSeed", err)
	}
	a, err := render([]byte("seed-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := render([]byte("seed-2"))
	if err != nil {
		t.Fatal(err)
	}
	fa, fb := a["ConfigMap/app"].Object.GetAnnotations()[AnnotationGeneratedInputs], b["ConfigMap/app"].Object.GetAnnotations()[AnnotationGeneratedInputs]
	if fa == "" || fa == fb {
		t.Errorf("fingerprints with two seeds: %q and %q; want two", fa, fb)
	}
}
