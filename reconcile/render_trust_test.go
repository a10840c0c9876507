package reconcile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// aliasBombYAML is a ConfigMap of 7 levels of 9 aliases (9^7 nodes).
func aliasBombYAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i < 7; i++ {
		b.WriteString("x" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		b.WriteString(strings.TrimSuffix(strings.Repeat("*a"+string(rune('0'+i-1))+",", 9), ","))
		b.WriteString("]\n")
	}
	return b.String()
}

// TestHostileRenderFailsReadAndChangesNothing commits, after a good commit
// that was applied, content that would make rendering reach the network,
// climb out of the repository, exhaust memory, round a number or read
// outside the repository through a symlink: the tick fails in read with
// reason invalid, nothing is written or pruned, and the next good commit
// recovers.
func TestHostileRenderFailsReadAndChangesNothing(t *testing.T) {
	tw := testenv.NewTripwire(t)
	kust := func(extra string) string {
		return "resources:\n- configmap.yaml\n- service.yaml\n- " + extra + "\n"
	}
	cases := []struct {
		name  string
		files map[string]string
		links map[string]string // name -> target
		says  []string
	}{
		{"remote reference", map[string]string{"kustomization.yaml": kust(`"http://` + tw.Addr + `/cm.yaml#x y"`)}, nil,
			[]string{"kustomization.yaml", "remote references are not supported"}},
		{"climb out of the repository", map[string]string{"kustomization.yaml": kust("../../evil")}, nil,
			[]string{"kustomization.yaml", `"../../evil"`, "outside the repository"}},
		{"alias bomb through kustomize", map[string]string{"kustomization.yaml": kust("bomb.yaml"), "bomb.yaml": aliasBombYAML()}, nil,
			[]string{"bomb.yaml", "alias expansion", "--render-max-alias-expansion"}},
		{"alias bomb", map[string]string{"bomb.yaml": aliasBombYAML()}, nil,
			[]string{"bomb.yaml", "alias expansion", "--render-max-alias-expansion"}},
		// The app's own Deployment, scaled to a number the server would
		// store as 0.
		{"oversize number", map[string]string{"deployment.yaml": strings.Replace(deploymentYAML, "replicas: 2", "replicas: 99999999999999999999999999999", 1)}, nil,
			[]string{"deployment.yaml", "Deployment/web", "spec.replicas"}},
		{"symlink outside the repository", nil, map[string]string{"link.yaml": "../../../etc/hostname"},
			[]string{"link.yaml", "outside the repository"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit("app", app())
			h.mustTick(reconcile.OutcomeApplied)
			cmBefore := h.get(gvrConfigMap, "web-config").GetResourceVersion()
			svcBefore := h.get(gvrService, "web").GetResourceVersion()
			deployBefore := h.get(gvrDeployment, "web").GetResourceVersion()

			stageLinks(t, h.repo.Dir, tc.links)
			h.repo.Commit("bad", tc.files)
			r := h.tick()
			expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonInvalid, tc.says...)
			if got := h.get(gvrConfigMap, "web-config").GetResourceVersion(); got != cmBefore {
				t.Errorf("config map resourceVersion %s -> %s: a failed read wrote", cmBefore, got)
			}
			if svc := h.get(gvrService, "web"); svc == nil || svc.GetResourceVersion() != svcBefore {
				t.Errorf("service changed or pruned by a failed read: %v", svc)
			}
			if got := h.get(gvrDeployment, "web").GetResourceVersion(); got != deployBefore {
				t.Errorf("deployment resourceVersion %s -> %s: a failed read wrote", deployBefore, got)
			}
			if h.get(gvrConfigMap, "bomb") != nil {
				t.Error("an object of the bad commit was applied")
			}

			// The next good commit recovers.
			fix := map[string]string{}
			for k := range tc.files {
				fix[k] = app()[k] // the good content, or "" (removed)
			}
			for k := range tc.links {
				fix[k] = ""
			}
			h.repo.Commit("fix", fix)
			h.mustTick(reconcile.OutcomeConverged)
		})
	}
	if n := tw.Conns(); n != 0 {
		t.Errorf("the listener saw %d connection(s), want none", n)
	}
}

// stageLinks creates symbolic links in the work tree at dir and stages
// them, for the next commit.
func stageLinks(t *testing.T, dir string, links map[string]string) {
	t.Helper()
	if len(links) == 0 {
		return
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
}
