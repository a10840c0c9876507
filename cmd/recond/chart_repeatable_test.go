package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// repeatableChartFiles is a chart with a generated certificate in Secret
// tls beside an ordinary password, a checksum of that Secret's template on
// ConfigMap app, and ConfigMap funcs listing a map with `keys` and
// `values` and a time with `ago`.
func repeatableChartFiles(password string, keys int) map[string]string {
	var m strings.Builder
	for i := range keys {
		fmt.Fprintf(&m, "  k%02d: %d\n", i, i)
	}
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"values.yaml": "password: " + password + "\nm:\n" + m.String(),
		"templates/funcs.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: funcs\ndata:\n" +
			"  keys: {{ keys .Values.m | join \",\" | quote }}\n  values: {{ values .Values.m | toJson | quote }}\n" +
			"  age: {{ ago (toDate \"2006-01-02\" \"2020-01-01\") | quote }}\n",
		"templates/secret.yaml": "{{- $ca := genCA \"shop-ca\" 365 }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n" +
			"stringData:\n  tls.crt: {{ $ca.Cert | quote }}\n  password: {{ .Values.password | quote }}\n",
		"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n" +
			"    checksum/secret: {{ include (print $.Template.BasePath \"/secret.yaml\") . | sha256sum }}\ndata:\n  k: v\n",
	}
}

// A chart renders the same in every process: Sprig's `keys` and `values`
// (Go's random map order) and `ago` (the clock) neither make a new process
// rewrite an object nor freeze it as generated-once (a key added to the
// map reaches the cluster); a checksum annotation over a template that
// mixes a generated certificate with an ordinary password changes with the
// password (pods roll), while the certificate is kept.
func TestChartRendersRepeatably(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("chart", repeatableChartFiles("p1", 20))
	args := append([]string{"sync"}, clusterArgs(t, repo.URL())...)
	ns := args[4]
	ctx := context.Background()
	sync := func(step string) string {
		t.Helper()
		code, _, errOut := recond(t, args...)
		if code != 0 {
			t.Fatalf("%s: sync exit %d", step, code)
		}
		return tickLine(errOut)
	}
	get := func() (keys, checksum, cert string) {
		t.Helper()
		f, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "funcs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return f.Data["keys"], a.Annotations["checksum/secret"], string(s.Data["tls.crt"])
	}

	line := sync("first")
	if !strings.Contains(line, `"generated_once":2`) {
		t.Errorf("first sync: the tick line does not count 2 generated-once objects (Secret tls, ConfigMap app):\n%s", line)
	}
	_, sum1, cert1 := get()

	// A new process, nothing changed: nothing is written.
	if line := sync("again"); !strings.Contains(line, `"created":0,"updated":0,"pruned":0`) {
		t.Errorf("a second process rewrote objects of the same commit:\n%s", line)
	}

	// A key added to the map reaches the cluster.
	repo.Commit("a key more", repeatableChartFiles("p1", 21))
	sync("a key more")
	if keys, _, _ := get(); !strings.HasSuffix(keys, ",k19,k20") || !strings.HasPrefix(keys, "k00,k01,") {
		t.Errorf("ConfigMap funcs keys = %q; want k00 to k20 in order", keys)
	}

	// A new password: the checksum changes, the certificate is kept.
	repo.Commit("a new password", repeatableChartFiles("p2", 21))
	sync("a new password")
	_, sum2, cert2 := get()
	if sum2 == sum1 {
		t.Errorf("the checksum annotation %s did not change with the password", sum1)
	}
	if cert2 != cert1 {
		t.Error("the generated certificate was made again")
	}
	// And a new process keeps both.
	if line := sync("after the new password"); !strings.Contains(line, `"created":0,"updated":0,"pruned":0`) {
		t.Errorf("a process after the new password rewrote objects:\n%s", line)
	}
	if _, sum3, cert3 := get(); sum3 != sum2 || cert3 != cert2 {
		t.Error("a new process changed the checksum or the certificate")
	}
}
