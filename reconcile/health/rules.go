package health

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// MaxRulesSize is the largest --health-rules file LoadRules reads.
const MaxRulesSize = 1 << 20

// CostLimit bounds the work of one expression's evaluation, in CEL's cost
// units (about one per operation); an evaluation that goes past it stops
// with an error, so a rule can slow a tick down only so much.
const CostLimit = 100_000

// Rules are per-kind health rules: CEL expressions that decide the health of
// the kinds that do not follow kstatus conventions. A nil *Rules has no
// rules. Rules are safe for concurrent use.
type Rules struct {
	byKind map[groupKind]*rule
}

// Len is the number of rules.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.byKind)
}

type groupKind struct{ group, kind string }

// rule is one kind's parsed rule, its expressions in the order they are
// evaluated.
type rule struct {
	exprs []expr
}

type expr struct {
	field  string // the YAML field: inProgress, failed or current
	status Status // what the object is when the expression is true
	src    string
	prg    cel.Program
}

// rulesFile is the --health-rules format. The field names are Flux's
// healthCheckExprs', so a rule can move between the two.
type rulesFile struct {
	Rules []ruleSpec `json:"rules"`
}

type ruleSpec struct {
	// APIVersion is group/version (v1 for the core group); the group is
	// what matches, any version of it.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// celEnv declares the variables an expression sees: the whole object as
// object, and its top-level fields on their own, so that status.phase and
// object.status.phase both work. All are dyn: objects have no schema here.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("apiVersion", cel.DynType),
		cel.Variable("kind", cel.DynType),
		cel.Variable("metadata", cel.DynType),
		cel.Variable("spec", cel.DynType),
		cel.Variable("status", cel.DynType),
	)
})

// topLevel are the variables bound to the object's own top-level fields.
var topLevel = []string{"apiVersion", "kind", "metadata", "spec", "status"}

// LoadRules reads and parses the rules file at path (--health-rules); it
// refuses a file larger than MaxRulesSize.
func LoadRules(path string) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("health rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRulesSize+1))
	if err != nil {
		return nil, fmt.Errorf("health rules %s: %w", path, err)
	}
	if len(data) > MaxRulesSize {
		return nil, fmt.Errorf("health rules %s: larger than %d bytes", path, MaxRulesSize)
	}
	r, err := ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("health rules %s: %w", path, err)
	}
	return r, nil
}

// ParseRules parses and validates rules in the --health-rules format:
//
//	rules:
//	- apiVersion: example.com/v1     # the group matches, any version
//	  kind: Widget
//	  current: 'status.phase == "Ready"'       # required
//	  inProgress: 'status.phase == "Pending"'  # optional
//	  failed: 'status.phase == "Failed"'       # optional
//
// Unknown fields are an error, as are a rule without apiVersion, kind or
// current, two rules for one group and kind, and an expression that does not
// compile or whose type is neither bool nor dyn. Errors name the rule by its
// position, counted from 1.
func ParseRules(data []byte) (*Rules, error) {
	var f rulesFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	rs := &Rules{byKind: make(map[groupKind]*rule, len(f.Rules))}
	seen := make(map[groupKind]int, len(f.Rules))
	for i, spec := range f.Rules {
		n := i + 1
		if spec.APIVersion == "" {
			return nil, fmt.Errorf("rule %d: apiVersion is required", n)
		}
		if spec.Kind == "" {
			return nil, fmt.Errorf("rule %d: kind is required", n)
		}
		gv, err := schema.ParseGroupVersion(spec.APIVersion)
		if err == nil && gv.Group == "" && gv.Version != "v1" {
			err = errors.New("want group/version, or v1 for the core group")
		}
		if err != nil {
			return nil, fmt.Errorf("rule %d: apiVersion %q: %w", n, spec.APIVersion, err)
		}
		gk := groupKind{gv.Group, spec.Kind}
		name := fmt.Sprintf("rule %d (%s)", n, gk)
		if prev, dup := seen[gk]; dup {
			return nil, fmt.Errorf("%s: same group and kind as rule %d", name, prev)
		}
		seen[gk] = n
		if strings.TrimSpace(spec.Current) == "" {
			return nil, fmt.Errorf("%s: current is required", name)
		}
		r := &rule{}
		for _, e := range []struct {
			field  string
			status Status
			src    string
		}{
			// Flux's order: the first that is true decides.
			{"inProgress", InProgress, spec.InProgress},
			{"failed", Failed, spec.Failed},
			{"current", Current, spec.Current},
		} {
			if strings.TrimSpace(e.src) == "" {
				continue
			}
			prg, err := compile(env, e.src)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, e.field, err)
			}
			r.exprs = append(r.exprs, expr{field: e.field, status: e.status, src: e.src, prg: prg})
		}
		rs.byKind[gk] = r
	}
	return rs, nil
}

func (gk groupKind) String() string {
	g := gk.group
	if g == "" {
		g = "core"
	}
	return g + " " + gk.kind
}

// compile checks that src is a boolean expression (or dyn, decided at
// evaluation) and makes its bounded program.
func compile(env *cel.Env, src string) (cel.Program, error) {
	ast, iss := env.Compile(src)
	if err := iss.Err(); err != nil {
		return nil, err
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("type is %s, want bool", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return prg, nil
}

func (r *Rules) lookup(group, kind string) *rule {
	if r == nil {
		return nil
	}
	return r.byKind[groupKind{group, kind}]
}

// assess evaluates the rule's expressions in order; the first that is true
// decides. An expression that errors (a missing field, the cost limit)
// counts as not true: if every one errored nothing says how the object is
// (Unknown), else it is on its way (InProgress).
func (r *rule) assess(u *unstructured.Unstructured) Assessment {
	vars := make(map[string]any, len(topLevel)+1)
	vars["object"] = u.Object
	for _, k := range topLevel {
		if v, ok := u.Object[k]; ok {
			vars[k] = v
		}
	}
	var errs []string
	for _, e := range r.exprs {
		out, _, err := e.prg.Eval(vars)
		if err != nil {
			errs = append(errs, e.field+": "+err.Error())
			continue
		}
		b, ok := out.Value().(bool)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: result is %s, not bool", e.field, out.Type()))
			continue
		}
		if !b {
			continue
		}
		if e.status == Current {
			return Assessment{Status: Current}
		}
		return Assessment{Status: e.status, Message: fmt.Sprintf("health rule %s is true: %s", e.field, e.src)}
	}
	if len(errs) == len(r.exprs) {
		return Assessment{Status: Unknown, Message: "every health rule expression failed: " + strings.Join(errs, "; ")}
	}
	msg := "no health rule expression is true"
	if len(errs) > 0 {
		msg += " (" + strings.Join(errs, "; ") + ")"
	}
	return Assessment{Status: InProgress, Message: msg}
}
