package testenv

import (
	"testing"

	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/internal/testenv/registry"
	"recond.dev/recond/internal/testenv/tools"
)

// The names below stand for those of the subpackages (apiproxy, registry,
// tools), for the tests that still call them by their testenv names.

// APIProxy is apiproxy.Proxy.
type APIProxy = apiproxy.Proxy

// Fault is apiproxy.Fault.
type Fault = apiproxy.Fault

// Match is apiproxy.Match.
type Match = apiproxy.Match

// WatchOnly is apiproxy.WatchOnly.
const WatchOnly = apiproxy.WatchOnly

// StartAPIProxy is apiproxy.Start.
func StartAPIProxy(t testing.TB, cfg *rest.Config) *APIProxy {
	t.Helper()
	return apiproxy.Start(t, cfg)
}

// Registry is registry.Registry.
type Registry = registry.Registry

// RegistryOptions is registry.Options.
type RegistryOptions = registry.Options

// Manifest is registry.Manifest.
type Manifest = registry.Manifest

// Layer is registry.Layer.
type Layer = registry.Layer

// TarEntry is registry.TarEntry.
type TarEntry = registry.TarEntry

// StartRegistry is registry.Start.
func StartRegistry(t testing.TB, opts RegistryOptions) *Registry {
	t.Helper()
	return registry.Start(t, opts)
}

// TarGz is registry.TarGz.
func TarGz(t testing.TB, entries ...TarEntry) []byte {
	t.Helper()
	return registry.TarGz(t, entries...)
}

// FilesTarGz is registry.FilesTarGz.
func FilesTarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	return registry.FilesTarGz(t, files)
}

// UpdateFixtures is tools.UpdateFixtures.
func UpdateFixtures() bool { return tools.UpdateFixtures() }

// FixtureText is tools.FixtureText.
func FixtureText(t testing.TB) string {
	t.Helper()
	return tools.FixtureText(t)
}

// MadeByPinned is tools.MadeByPinned.
func MadeByPinned(t testing.TB, versionFile, tool, module string) {
	t.Helper()
	tools.MadeByPinned(t, versionFile, tool, module)
}

// ToolVersion is tools.Version.
func ToolVersion(t testing.TB, bin, module string) string {
	t.Helper()
	return tools.Version(t, bin, module)
}

// ToolBin is tools.Find of the tool the variable env names, which make
// provides.
func ToolBin(t testing.TB, env, make string) string {
	t.Helper()
	return tools.Find(t, tools.Tool{Name: env, Env: env, Provide: "`" + make + "` provides it"})
}
