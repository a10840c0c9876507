package deploy

import (
	"debug/buildinfo"
	"debug/elf"
	"fmt"
)

// CheckStatic returns an error unless the ELF binary at path is statically
// linked (no program interpreter, no dynamic section, no shared library) and,
// when it is a Go binary, was built with CGO_ENABLED=0 — what a scratch or
// distroless/static image needs. It returns the Go build settings it found
// (nil for a binary that is not Go) for the caller to print.
func CheckStatic(path string) (map[string]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			return nil, fmt.Errorf("%s is dynamically linked: it has a program interpreter (PT_INTERP)", path)
		case elf.PT_DYNAMIC:
			return nil, fmt.Errorf("%s is dynamically linked: it has a dynamic section (PT_DYNAMIC)", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return nil, fmt.Errorf("%s needs shared libraries %v", path, libs)
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, nil // not a Go binary (or stripped of its build info): ELF says static
	}
	settings := map[string]string{"go": bi.GoVersion, "path": bi.Path}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		return settings, fmt.Errorf("%s was built with CGO_ENABLED=%q, want 0", path, settings["CGO_ENABLED"])
	}
	return settings, nil
}
