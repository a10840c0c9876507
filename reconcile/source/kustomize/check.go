package kustomize

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"

	"recond.dev/recond/reconcile/source/render"
)

// Files are the names of a kustomization file, in the order kustomize
// looks for them.
var Files = konfig.RecognizedKustomizationFileNames()

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
func checkKustomizations(tfs *render.FS, dir string) error {
	seen := map[string]bool{}
	var visit func(dir string) error
	visit = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		file := ""
		var data []byte
		for _, name := range Files {
			p := path.Join(dir, name)
			n, err := tfs.Lookup(render.Abs(p))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if n.File == nil {
				continue
			}
			if data, err = tfs.Read(n); err != nil {
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
			return &render.ManifestError{File: file, Err: err}
		}
		if len(k.HelmChartInflationGenerator) > 0 {
			return &render.ManifestError{File: file, Err: errors.New("helmChartInflationGenerator is not supported: use helmCharts (charts vendored under helmGlobals.chartHome)")}
		}
		if err := checkHelmCharts(tfs, dir, &k); err != nil {
			return &render.ManifestError{File: file, Err: err}
		}
		psm := k.PatchesStrategicMerge
		k.FixKustomization()

		var dirs []string
		check := func(field, entry string, dirOK bool) error {
			n, err := checkEntry(tfs, dir, entry)
			if err != nil {
				return &render.ManifestError{File: file, Err: fmt.Errorf("%s entry %q: %w", field, entry, err)}
			}
			if n.Dir != nil {
				if !dirOK {
					return &render.ManifestError{File: file, Err: fmt.Errorf("%s entry %q: is a directory", field, entry)}
				}
				dirs = append(dirs, n.Path)
			}
			if n.File != nil {
				// What may be SOPS-encrypted (decrypt.go): a manifest, if it
				// is a Secret; a patch never (kustomize applies it to any
				// kind its target names).
				switch field {
				case "patches", "patchesJson6902", "patchesStrategicMerge", "replacements":
					tfs.Budget().SetPlain(n.Path, "a "+field+" entry of "+file)
				case "files", "envs":
				default:
					tfs.Budget().SetRole(n.Path, render.RoleManifest)
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
			role render.Role // what its sources are read as (decrypt.go)
		}
		gens := make([]generator, 0, len(k.ConfigMapGenerator)+len(k.SecretGenerator))
		for _, g := range k.ConfigMapGenerator {
			gens = append(gens, generator{g.GeneratorArgs, render.RolePlain})
		}
		for _, g := range k.SecretGenerator {
			gens = append(gens, generator{g.GeneratorArgs, render.RoleGenerator})
		}
		source := func(field, entry string, role render.Role) error {
			if err := check(field, entry, false); err != nil {
				return err
			}
			if n, err := tfs.Resolve(path.Join(dir, entry)); err == nil && n.File != nil {
				if role == render.RolePlain {
					tfs.Budget().SetPlain(n.Path, "a configMapGenerator's "+field+" entry of "+file)
				} else {
					tfs.Budget().SetRole(n.Path, role)
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
		if err := checkSecretSources(tfs, file, dir, &k); err != nil {
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
func checkEntry(tfs *render.FS, dir, entry string) (*render.Node, error) {
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
		return nil, fmt.Errorf("resolves to %s, %w", p, render.ErrOutside)
	}
	n, err := tfs.Resolve(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no such file or directory in the repository (%s)", p)
		}
		return nil, err
	}
	if err := tfs.Context().Err(); err != nil {
		return nil, err
	}
	return n, nil
}

// checkHelmCharts checks that a kustomization's helmCharts read only the
// repository: helmGlobals.chartHome (default charts/) and every values
// file resolve inside it, and each chart is there (recond downloads
// nothing: a repo or version only names where the chart came from).
func checkHelmCharts(tfs *render.FS, dir string, k *types.Kustomization) error {
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
		if err != nil || n.Dir == nil {
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
			if n.File != nil {
				tfs.Budget().SetRole(n.Path, render.RoleValues) // may be SOPS-encrypted (decrypt.go)
			}
		}
	}
	return nil
}

// checkSecretSources checks what the kustomization file (in dir,
// already unmarshalled and fixed into k) generates or patches into Secrets,
// before kustomize runs, so that the mistakes kustomize or the API server
// would quote a value back for fail here, naming the kustomization file,
// the Secret and the entry: a secretGenerator literal that is not key=value
// ("password:Hunter2"), a key a Secret may not hold (from a literal, an env
// file line such as "DB_PASSWORD: Hunter2", or a file), an env file line
// that is not UTF-8. It also gathers the secret material kustomize will
// handle: every literal's value, and, marked secret as a whole for the rest
// of the render, every env file and file of a secretGenerator and every
// patch file that targets a Secret (an inline one's values are added).
// The env files are read here, through the render's bounded file system
// (and charged to its budget; kustomize reads them again).
func checkSecretSources(f *render.FS, file, dir string, k *types.Kustomization) error {
	m := f.Budget().Secrets()
	resolved := func(entry string) string {
		p := path.Join(dir, entry)
		if n, err := f.Resolve(p); err == nil {
			return n.Path
		}
		return p
	}
	for _, p := range k.Patches {
		if p.Target == nil || p.Target.Kind != "Secret" {
			if p.Patch == "" || !strings.Contains(p.Patch, "Secret") {
				continue
			}
		}
		if p.Path != "" {
			m.MarkPatch(resolved(p.Path))
		}
		if p.Patch != "" {
			m.AddInlinePatch(p.Patch)
		}
	}
	for _, p := range k.PatchesJson6902 {
		if p.Target == nil || p.Target.Kind != "Secret" {
			continue
		}
		if p.Path != "" {
			m.MarkPatch(resolved(p.Path))
		}
		if p.Patch != "" {
			m.AddInlinePatch(p.Patch)
		}
	}
	for _, g := range k.SecretGenerator {
		object := render.Ref("Secret", g.Name)
		fail := func(format string, args ...any) error {
			return &render.ManifestError{File: file, Object: object, Err: render.SecretErrorf("secretGenerator: "+format, args...)}
		}
		for i, lit := range g.LiteralSources {
			m.AddText(lit)
			key, v, ok := strings.Cut(lit, "=")
			if ok {
				m.AddGenerated(v)
				if l := len(v); l >= 2 && (v[0] == '"' || v[0] == '\'') && v[l-1] == v[0] {
					m.AddGenerated(v[1 : l-1])
				}
			}
			switch {
			case !ok:
				return fail("literals[%d] %s is not key=value (write KEY=value; the rest of the literal is not shown, as it may hold a value)", i, render.SafeKey(lit))
			case key == "":
				return fail("literals[%d] has an empty key (write KEY=value)", i)
			case !render.ValidKey(key):
				return fail("literals[%d]: key %s is not a valid Secret key (%s; the rest is not shown)", i, render.SafeKey(key), render.KeyRule)
			}
		}
		for i, src := range g.FileSources {
			key, p, hasKey := strings.Cut(src, "=")
			if !hasKey {
				key, p = path.Base(src), src
			}
			m.MarkFile(resolved(p))
			if !render.ValidKey(key) {
				return fail("files[%d]: key %s is not a valid Secret key (%s; write KEY=path)", i, render.SafeKey(key), render.KeyRule)
			}
		}
		for _, src := range g.EnvSources {
			n, err := f.Resolve(path.Join(dir, src))
			if err != nil || n.File == nil {
				continue // checkKustomizations or kustomize says what is wrong
			}
			m.MarkFile(n.Path)
			data, err := f.Read(n)
			if err != nil {
				return err
			}
			if err := checkEnvFile(data, func(line int, format string, args ...any) error {
				return fail("envs %s line %d: "+format, append([]any{src, line}, args...)...)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEnvFile checks the lines of an env file as kustomize reads them:
// KEY=value, or a key alone; blank lines and lines starting with '#' are
// skipped.
func checkEnvFile(data []byte, fail func(line int, format string, args ...any) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte{0xEF, 0xBB, 0xBF})
		}
		if !utf8.Valid(line) {
			return fail(n, "not valid UTF-8 (the line is not shown)")
		}
		s := strings.TrimLeft(string(line), " \t\r\n\v\f")
		if s == "" || s[0] == '#' {
			continue
		}
		k, _, _ := strings.Cut(s, "=")
		if !render.ValidKey(k) {
			return fail(n, "key %s is not a valid Secret key (%s; write KEY=value; the rest of the line is not shown, as it may hold a value)", render.SafeKey(k), render.KeyRule)
		}
	}
	return sc.Err()
}
