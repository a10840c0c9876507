package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"recond.dev/recond/internal/testenv/tools"
)

type scrapeConfig struct {
	JobName             string `yaml:"job_name"`
	KubernetesSDConfigs []struct {
		Role string `yaml:"role"`
	} `yaml:"kubernetes_sd_configs"`
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
}

func scrapeConfigs(t *testing.T) map[string]scrapeConfig {
	t.Helper()
	b, err := os.ReadFile("monitoring/scrape-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]scrapeConfig{}
	for _, sc := range file.ScrapeConfigs {
		for _, rc := range sc.RelabelConfigs {
			if err := rc.Validate(model.UTF8Validation); err != nil {
				t.Fatalf("%s: %v", sc.JobName, err)
			}
		}
		out[sc.JobName] = sc
	}
	return out
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// metaLabel is Prometheus' Kubernetes discovery label name for a Kubernetes
// label: app.kubernetes.io/name -> <prefix>app_kubernetes_io_name.
func metaLabel(prefix, k8sLabel string) string {
	return prefix + invalidLabelChars.ReplaceAllString(k8sLabel, "_")
}

// relabelTarget runs a job's relabelling on a discovered target as
// Prometheus does (job starts as the job name) and returns the target's
// labels, or nil when the target is dropped.
func relabelTarget(sc scrapeConfig, discovered map[string]string) map[string]string {
	lb := labels.NewBuilder(labels.FromMap(discovered))
	lb.Set("job", sc.JobName)
	if !relabel.ProcessBuilder(lb, sc.RelabelConfigs...) {
		return nil
	}
	return lb.Labels().Map()
}

// The plain Prometheus scrape config keeps exactly recond's targets, as the
// manifests describe them (the base's Service and port, the sidecar's
// container port), and labels them job="recond" with their namespace — the
// labels the alerts and dashboards group by. promtool accepts the file.
func TestScrapeConfig(t *testing.T) {
	scs := scrapeConfigs(t)
	endpoints, pods := scs["recond"], scs["recond-sidecar"]
	if len(endpoints.KubernetesSDConfigs) != 1 || endpoints.KubernetesSDConfigs[0].Role != "endpoints" ||
		len(pods.KubernetesSDConfigs) != 1 || pods.KubernetesSDConfigs[0].Role != "pod" {
		t.Fatalf("want jobs recond (role endpoints) and recond-sidecar (role pod), got %+v", scs)
	}

	var svc corev1.Service
	fromUnstructured(t, find(t, render(t, "base").Objects, "Service", "recond"), &svc)
	serviceTarget := func(svc corev1.Service, port string) map[string]string {
		l := map[string]string{
			"__address__":                          "10.0.0.7:8080",
			"__meta_kubernetes_namespace":          "team-a",
			"__meta_kubernetes_service_name":       svc.Name,
			"__meta_kubernetes_pod_name":           svc.Name + "-5d8f7",
			"__meta_kubernetes_endpoint_port_name": port,
		}
		for k, v := range svc.Labels {
			l[metaLabel("__meta_kubernetes_service_label_", k)] = v
		}
		return l
	}
	want := func(what string, got map[string]string) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: dropped, want scraped", what)
			return
		}
		if got["job"] != "recond" || got["namespace"] != "team-a" {
			t.Errorf("%s: job=%q namespace=%q, want recond and team-a", what, got["job"], got["namespace"])
		}
	}
	want("the base's Service", relabelTarget(endpoints, serviceTarget(svc, svc.Spec.Ports[0].Name)))
	if got := relabelTarget(endpoints, serviceTarget(svc, "other")); got != nil {
		t.Errorf("another port of Service recond is scraped: %v", got)
	}
	web := corev1.Service{}
	web.Name, web.Labels = "web", map[string]string{"app.kubernetes.io/name": "web"}
	if got := relabelTarget(endpoints, serviceTarget(web, "http-metrics")); got != nil {
		t.Errorf("another application's Service is scraped as recond: %v", got)
	}

	// The pod role yields a target per container port.
	podTargets := func(d *appsv1.Deployment) map[string]map[string]string {
		out := map[string]map[string]string{}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				out[c.Name+"/"+p.Name] = relabelTarget(pods, map[string]string{
					"__address__":                                 "10.0.0.8:" + p.Name,
					"__meta_kubernetes_namespace":                 "team-a",
					"__meta_kubernetes_pod_name":                  d.Name + "-7c9d",
					"__meta_kubernetes_pod_container_name":        c.Name,
					"__meta_kubernetes_pod_container_port_name":   p.Name,
					"__meta_kubernetes_pod_container_port_number": strconv.Itoa(int(p.ContainerPort)),
				})
			}
		}
		return out
	}
	var sidecarFound bool
	for d := range recondContainers(t, render(t, "examples/sidecar").Objects) {
		for name, got := range podTargets(d) {
			if strings.HasPrefix(name, "recond/") {
				sidecarFound = true
				want("the sidecar's "+name, got)
			} else if got != nil {
				t.Errorf("the workload's own port %s is scraped as recond: %v", name, got)
			}
		}
	}
	if !sidecarFound {
		t.Error("no recond container port in examples/sidecar")
	}
	// The base's pod is scraped through its Service only, not twice.
	for d := range recondContainers(t, render(t, "base").Objects) {
		for name, got := range podTargets(d) {
			if got != nil {
				t.Errorf("the base's pod port %s is also scraped by the sidecar job: %v", name, got)
			}
		}
	}

	promtool := tools.Find(t, tools.Promtool)
	out, err := exec.Command(promtool, "check", "config", "--syntax-only", "monitoring/scrape-config.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	t.Logf("promtool check config:\n%s", out)
}
