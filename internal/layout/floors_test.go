package layout

// floors gives every package of the module its floor; a package imports
// only packages of lower floors (its tests may import the test bed and
// anything not above it). A new package needs its entry here.
var floors = map[string]int{
	// Floor 0: vocabulary and leaves that import nothing of the project:
	// reasons, keys, masks, trees, the Lease, the webhook.
	"alerts":                      0,
	"bench/internal/fluxfleet":    0,
	"deploy":                      0,
	"internal/layout":             0,
	"internal/reason":             0,
	"internal/redact":             0,
	"internal/redact/redacttest":  0,
	"internal/revision":           0,
	"internal/testenv/kubeconfig": 0,
	"internal/testenv/tinyca":     0,
	"internal/testenv/tools":      0,
	"leader":                      0,
	"reconcile/heal":              0,
	"reconcile/keys":              0,
	"reconcile/source/manifest":   0,
	"reconcile/source/oci/cosign": 0,
	"reconcile/source/sshsig":     0,
	"reconcile/source/tree":       0,
	"webhook":                     0,

	// Floor 1.
	"alerts/gen":                     1,
	"dashboards":                     1,
	"deploy/checkstatic":             1,
	"deploy/render":                  1,
	"internal/testenv/apiproxy":      1,
	"internal/testenv/registry":      1,
	"internal/transient":             1,
	"reconcile/diff":                 1,
	"reconcile/health":               1,
	"reconcile/optout":               1,
	"reconcile/source/chartspec":     1,
	"reconcile/source/fetch":         1,
	"reconcile/source/git/signature": 1,
	"reconcile/source/sops":          1,
	"reconcile/suspend":              1,
	"reconcile/verdict":              1,

	// Floor 2.
	"dashboards/gen":                         2,
	"deploy/gen":                             2,
	"internal/testenv":                       2,
	"reconcile/schema":                       2,
	"reconcile/source/git/signature/sigtest": 2,
	"reconcile/source/render":                2,
	"reconcile/wave":                         2,

	// Floor 3.
	"reconcile/cluster":     3,
	"reconcile/source/git":  3,
	"reconcile/source/helm": 3,
	"reconcile/source/oci":  3,

	// Floor 4.
	"reconcile/hook":             4,
	"reconcile/source/kustomize": 4,
	"reconcile/source/worker":    4,
	"reconcile/watch":            4,
	"reconcile/writerule":        4,

	// Floor 5.
	"reconcile/inventory":       5,
	"reconcile/source/renderer": 5,

	// Floor 6.
	"reconcile/source": 6,

	// Floor 7.
	"reconcile/failure":   7,
	"reconcile/generated": 7,

	// Floor 8.
	"reconcile/decorate": 8,
	"reconcile/loop":     8,

	// Floor 9.
	"reconcile/record": 9,

	// Floor 10.
	"reconcile": 10,

	// Floor 11.
	"events":    11,
	"hack/demo": 11,
	"status":    11,
	"tracing":   11,

	// Floor 12.
	"metrics": 12,

	// Floor 13.
	"cmd/recond":        13,
	"cmd/recond-render": 13,

	// Floor 14: suites that hold only tests over the binary and the engine
	// (benchmarks, the fault matrix).
	"bench":  14,
	"faults": 14,
}
