package deploy_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"recond.dev/recond/deploy"
)

// docKustomizations returns every complete kustomization in docs/deploy.md:
// yaml code blocks and heredocs of sh code blocks holding
// "kind: Kustomization".
func docKustomizations(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fence := regexp.MustCompile("^(\\s*)```(\\w*)\\s*$")
	heredoc := regexp.MustCompile(`<<'EOF'\s*$`)
	var out []string
	var block []string
	var indent, lang string
	in, inHeredoc := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			if !in {
				in, indent, lang, block = true, m[1], m[2], nil
				continue
			}
			in = false
			if lang == "yaml" {
				out = append(out, strings.Join(block, "\n")+"\n")
			}
			continue
		}
		if !in {
			continue
		}
		line = strings.TrimPrefix(line, indent)
		switch {
		case lang == "yaml":
			block = append(block, line)
		case lang == "sh" && heredoc.MatchString(line):
			inHeredoc, block = true, nil
		case lang == "sh" && inHeredoc && line == "EOF":
			inHeredoc = false
			out = append(out, strings.Join(block, "\n")+"\n")
		case inHeredoc:
			block = append(block, line)
		}
	}
	var kustomizations []string
	for _, b := range out {
		if strings.Contains(b, "kind: Kustomization") {
			kustomizations = append(kustomizations, b)
		}
	}
	return kustomizations
}

// The overlays docs/deploy.md tells users to write render, resolve their
// references and (with a control plane) are admitted by the API server, laid
// out as the document says: next to a checkout named recond.
func TestDocsKustomizations(t *testing.T) {
	docs := docKustomizations(t)
	if len(docs) < 4 {
		t.Fatalf("found %d kustomizations in docs/deploy.md, want the namespace overlay, monitoring, second instance and sidecar", len(docs))
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile("examples/sidecar/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kustomizations in docs/deploy.md", len(docs))
	for i, doc := range docs {
		dir := t.TempDir()
		if err := os.Symlink(root, filepath.Join(dir, "recond")); err != nil {
			t.Fatal(err)
		}
		overlay := filepath.Join(dir, "overlay")
		if err := os.Mkdir(overlay, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string][]byte{"kustomization.yaml": []byte(doc), "deployment.yaml": sample} {
			if err := os.WriteFile(filepath.Join(overlay, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := deploy.Render(overlay)
		if err != nil {
			t.Errorf("kustomization %d of docs/deploy.md:\n%s\n%v", i+1, doc, err)
			continue
		}
		checkReferences(t, r.Objects)
		if cp == nil {
			continue
		}
		for _, o := range r.Objects {
			if ns := o.GetNamespace(); ns != "" {
				ensureNamespace(t, ns)
			}
			if o.GroupVersionKind().Group == "monitoring.coreos.com" {
				installMonitoringCRDs(t)
			}
		}
		if err := newKube(t, cp.Config).apply(r.Objects, cp.Namespace(t), true); err != nil {
			t.Errorf("kustomization %d of docs/deploy.md:\n%s\n%v", i+1, doc, err)
		}
	}
}
