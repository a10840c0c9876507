package source

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
)

// kustomizationFiles are the names kustomize looks for, in its order.
var kustomizationFiles = konfig.RecognizedKustomizationFileNames()

// remoteRE matches what looks like a URL or a remote Git repository: a
// scheme, go-getter's "git::", scp-like "user@host:path", or a well-known
// host. It only chooses the wording of the error: any entry that does not
// resolve inside the repository is refused anyway.
var remoteRE = regexp.MustCompile(`(?i)^\s*(git::|[a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:|(github|gitlab|bitbucket)\.(com|org)[/:])`)

// checkKustomizations reads every kustomization reachable from dir and
// refuses, with a message naming the kustomization file and the entry,
// every location that is not a relative path resolving inside the
// repository, and every helm chart. It gives clear messages; what enforces
// the boundary is the file system kustomize reads through.
func checkKustomizations(tfs *treeFS, dir string) error {
	seen := map[string]bool{}
	var visit func(dir string) error
	visit = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		file := ""
		var data []byte
		for _, name := range kustomizationFiles {
			p := path.Join(dir, name)
			n, err := tfs.lookup(abs(p))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if n.file == nil {
				continue
			}
			if data, err = tfs.read(n); err != nil {
				return err
			}
			file = p
			break
		}
		if file == "" {
			return nil // a directory without kustomization: kustomize says so
		}
		var k types.Kustomization
		if err := k.Unmarshal(data); err != nil {
			return &ManifestError{File: file, Err: err}
		}
		if len(k.HelmChartInflationGenerator) > 0 {
			return &ManifestError{File: file, Err: errors.New("helmChartInflationGenerator is not supported: use helmCharts (charts vendored under helmGlobals.chartHome)")}
		}
		if err := checkHelmCharts(tfs, dir, &k); err != nil {
			return &ManifestError{File: file, Err: err}
		}
		psm := k.PatchesStrategicMerge
		k.FixKustomization()

		var dirs []string
		check := func(field, entry string, dirOK bool) error {
			n, err := checkEntry(tfs, dir, entry)
			if err != nil {
				return &ManifestError{File: file, Err: fmt.Errorf("%s entry %q: %w", field, entry, err)}
			}
			if n.tree != nil {
				if !dirOK {
					return &ManifestError{File: file, Err: fmt.Errorf("%s entry %q: is a directory", field, entry)}
				}
				dirs = append(dirs, n.path)
			}
			if n.file != nil {
				// What may be SOPS-encrypted (decrypt.go): a manifest, if it
				// is a Secret; a patch never (kustomize applies it to any
				// kind its target names).
				switch field {
				case "patches", "patchesJson6902", "patchesStrategicMerge", "replacements":
					tfs.b.dec.setPlain(n.path, "a "+field+" entry of "+file)
				case "files", "envs":
				default:
					tfs.b.dec.setRole(n.path, roleManifest)
				}
			}
			return nil
		}
		for _, l := range []struct {
			field   string
			entries []string
			dirOK   bool
		}{
			{"resources", k.Resources, true}, // bases are in resources now
			{"components", k.Components, true},
			{"generators", k.Generators, true},
			{"transformers", k.Transformers, true},
			{"validators", k.Validators, true},
			{"crds", k.Crds, false},
			{"configurations", k.Configurations, false},
		} {
			for _, e := range l.entries {
				if err := check(l.field, e, l.dirOK); err != nil {
					return err
				}
			}
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				if err := check("patches", p.Path, false); err != nil {
					return err
				}
			}
		}
		for _, p := range k.PatchesJson6902 {
			if p.Path != "" {
				if err := check("patchesJson6902", p.Path, false); err != nil {
					return err
				}
			}
		}
		for _, p := range psm {
			if s := strings.TrimSpace(string(p)); s != "" && !strings.ContainsAny(s, "\n{") {
				if err := check("patchesStrategicMerge", s, false); err != nil {
					return err
				}
			}
		}
		for _, r := range k.Replacements {
			if r.Path != "" {
				if err := check("replacements", r.Path, false); err != nil {
					return err
				}
			}
		}
		type generator struct {
			types.GeneratorArgs
			role fileRole // what its sources are read as (decrypt.go)
		}
		gens := make([]generator, 0, len(k.ConfigMapGenerator)+len(k.SecretGenerator))
		for _, g := range k.ConfigMapGenerator {
			gens = append(gens, generator{g.GeneratorArgs, rolePlain})
		}
		for _, g := range k.SecretGenerator {
			gens = append(gens, generator{g.GeneratorArgs, roleGenerator})
		}
		source := func(field, entry string, role fileRole) error {
			if err := check(field, entry, false); err != nil {
				return err
			}
			if n, err := tfs.r.resolve(path.Join(dir, entry)); err == nil && n.file != nil {
				if role == rolePlain {
					tfs.b.dec.setPlain(n.path, "a configMapGenerator's "+field+" entry of "+file)
				} else {
					tfs.b.dec.setRole(n.path, role)
				}
			}
			return nil
		}
		for _, g := range gens {
			for _, f := range g.FileSources {
				if _, after, ok := strings.Cut(f, "="); ok { // "key=path"
					f = after
				}
				if err := source("files", f, g.role); err != nil {
					return err
				}
			}
			for _, f := range g.EnvSources {
				if err := source("envs", f, g.role); err != nil {
					return err
				}
			}
		}
		// secretGenerator mistakes that would quote a value; secret material.
		if err := tfs.checkSecretSources(file, dir, &k); err != nil {
			return err
		}
		if p, ok := k.OpenAPI["path"]; ok {
			if err := check("openapi.path", p, false); err != nil {
				return err
			}
		}
		for _, d := range dirs {
			if err := visit(d); err != nil {
				return err
			}
		}
		return nil
	}
	return visit(dir)
}

// checkEntry resolves a kustomization entry relative to dir.
func checkEntry(tfs *treeFS, dir, entry string) (*node, error) {
	switch {
	case entry == "":
		return nil, errors.New("empty path")
	case remoteRE.MatchString(entry) || strings.Contains(entry, "://"):
		return nil, errors.New("remote references are not supported: recond renders only files inside the repository; copy it into the repository")
	case path.IsAbs(entry) || strings.HasPrefix(entry, `\`):
		return nil, errors.New("absolute paths are not supported: use a path relative to the kustomization")
	}
	p := path.Join(dir, entry)
	if p == ".." || strings.HasPrefix(p, "../") {
		return nil, fmt.Errorf("resolves to %s, %w", p, errOutside)
	}
	n, err := tfs.r.resolve(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no such file or directory in the repository (%s)", p)
		}
		return nil, err
	}
	if err := tfs.ctx.Err(); err != nil {
		return nil, err
	}
	return n, nil
}

// checkHelmCharts checks that a kustomization's helmCharts read only the
// repository: helmGlobals.chartHome (default charts/) and every values
// file resolve inside it, and each chart is there (recond downloads
// nothing: a repo or version only names where the chart came from).
func checkHelmCharts(tfs *treeFS, dir string, k *types.Kustomization) error {
	if len(k.HelmCharts) == 0 {
		return nil
	}
	home := types.HelmDefaultHome
	if k.HelmGlobals != nil && k.HelmGlobals.ChartHome != "" {
		home = k.HelmGlobals.ChartHome
	}
	if k.HelmGlobals != nil && k.HelmGlobals.ConfigHome != "" {
		return fmt.Errorf("helmGlobals.configHome %q: recond runs no helm and reads no helm configuration", k.HelmGlobals.ConfigHome)
	}
	if _, err := checkEntry(tfs, dir, home); err != nil {
		return fmt.Errorf("helmGlobals.chartHome %q: %w", home, err)
	}
	for _, c := range k.HelmCharts {
		chart := path.Join(home, c.Name)
		if c.Version != "" && c.Repo != "" {
			chart = path.Join(home, c.Name+"-"+c.Version, c.Name)
		}
		n, err := checkEntry(tfs, dir, chart)
		if err != nil || n.tree == nil {
			return fmt.Errorf("helmCharts %q: no chart at %s (recond downloads nothing: vendor the chart there, e.g. `helm pull --untar`, and commit it)", c.Name, path.Join(dir, chart))
		}
		for _, f := range append([]string{c.ValuesFile}, c.AdditionalValuesFiles...) {
			if f == "" {
				continue
			}
			n, err := checkEntry(tfs, dir, f)
			if err != nil {
				return fmt.Errorf("helmCharts %q: values file %q: %w", c.Name, f, err)
			}
			if n.file != nil {
				tfs.b.dec.setRole(n.path, roleValues) // may be SOPS-encrypted (decrypt.go)
			}
		}
	}
	return nil
}
