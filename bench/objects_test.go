package bench

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifests returns n objects (ConfigMaps, Services and Deployments in
// thirds) as three multi-document YAML files. Services are headless, so
// that thousands of them need no cluster IP from the test bed's small
// service range; Deployments set none of the fields the server defaults.
func manifests(n int) map[string]string {
	var cms, svcs, deps strings.Builder
	for i := range n / 3 {
		fmt.Fprintf(&cms, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-%04d
data:
  k: v%d
`, i, i)
		fmt.Fprintf(&svcs, `---
apiVersion: v1
kind: Service
metadata:
  name: svc-%04d
spec:
  clusterIP: None
  selector:
    app: w-%04d
  ports:
    - port: 80
      targetPort: 8080
`, i, i)
		fmt.Fprintf(&deps, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: dep-%04d
  labels:
    app: w-%04d
spec:
  replicas: 2
  selector:
    matchLabels:
      app: w-%04d
  template:
    metadata:
      labels:
        app: w-%04d
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 8080
          env:
            - name: MODE
              value: bench
          resources:
            requests:
              cpu: 0.5
              memory: 64Mi
`, i, i, i, i)
	}
	return map[string]string{"configmaps.yaml": cms.String(), "services.yaml": svcs.String(), "deployments.yaml": deps.String()}
}

// objects decodes manifests(n) into objects in namespace ns, in the order
// ConfigMaps, Services, Deployments.
func objects(n int, ns string) ([]*unstructured.Unstructured, error) {
	files := manifests(n)
	var out []*unstructured.Unstructured
	for _, name := range []string{"configmaps.yaml", "services.yaml", "deployments.yaml"} {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(files[name])), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err == io.EOF {
					break
				}
				return nil, fmt.Errorf("decode %s: %w", name, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace(ns)
			out = append(out, u)
		}
	}
	return out, nil
}
