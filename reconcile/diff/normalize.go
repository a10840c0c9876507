package diff

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// isZero reports whether v is absent or a zero value the API server drops:
// nil, "", false, 0, an empty map or an empty list.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	n, ok := toNumber(v)
	return ok && n.equal(number{isInt: true})
}

// scalarEqual compares two decoded scalars of type t: quantities and
// durations by value when both sides parse, numbers numerically, anything
// else exactly. An int-or-string's 80 and "80" differ, as the server keeps
// them apart.
func scalarEqual(t FieldType, a, b any) bool {
	switch t {
	case FieldQuantity:
		if qa, ok := toQuantity(a); ok {
			if qb, ok := toQuantity(b); ok {
				return qa.Cmp(qb) == 0
			}
		}
	case FieldDuration:
		if eq, ok := durationEqual(a, b); ok {
			return eq
		}
	}
	na, aok := toNumber(a)
	nb, bok := toNumber(b)
	if aok || bok {
		return aok && bok && na.equal(nb)
	}
	return reflect.DeepEqual(a, b)
}

// deepEqual compares whole values strictly, except that numbers compare
// numerically.
func deepEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !deepEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(FieldPlain, a, b)
}

// number is a decoded JSON/YAML number: int64 when integral, else float64.
type number struct {
	isInt bool
	i     int64
	f     float64
}

func (n number) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

func (n number) equal(m number) bool {
	if n.isInt && m.isInt {
		return n.i == m.i
	}
	return n.float() == m.float()
}

func fromFloat(f float64) number {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return number{isInt: true, i: int64(f)}
	}
	return number{f: f}
}

// toNumber converts any Go numeric type, or a json.Number, to a number.
func toNumber(v any) (number, bool) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return number{isInt: true, i: i}, true
		}
		f, err := n.Float64()
		return fromFloat(f), err == nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return number{isInt: true, i: rv.Int()}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return number{isInt: true, i: int64(u)}, true
		}
		return number{f: float64(rv.Uint())}, true
	case reflect.Float32, reflect.Float64:
		return fromFloat(rv.Float()), true
	}
	return number{}, false
}

// toQuantity parses a quantity given as a string ("500m", "1Gi") or as a
// number (cpu: 1, cpu: 0.5).
func toQuantity(v any) (resource.Quantity, bool) {
	if s, ok := v.(string); ok {
		q, err := resource.ParseQuantity(s)
		return q, err == nil
	}
	n, ok := toNumber(v)
	if !ok {
		return resource.Quantity{}, false
	}
	if n.isInt {
		return *resource.NewQuantity(n.i, resource.DecimalSI), true
	}
	q, err := resource.ParseQuantity(strconv.FormatFloat(n.f, 'f', -1, 64))
	return q, err == nil
}

// formatScalar renders a list key or set value for a path: strings bare,
// numbers without exponent.
func formatScalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if n, ok := toNumber(v); ok {
		if n.isInt {
			return strconv.FormatInt(n.i, 10)
		}
		return strconv.FormatFloat(n.f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// join appends a map key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// within reports whether path is p or lies under p.
func within(path, p string) bool {
	return path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")
}
