package dashboards

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Query is one PromQL expression of a dashboard: a Prometheus target of a
// panel, or the query of a template variable (Panel is then "variable
// <name>" and RefID is empty).
type Query struct{ File, Panel, RefID, Expr string }

// Queries returns the PromQL of the dashboard JSON files (file name →
// JSON), in file name order, then panel order (rows included), then the
// template variables'. Targets of data sources other than Prometheus are left
// out, and so are variable queries in Grafana's own syntax
// (label_values(...), label_names(...), metrics(...)); query_result(expr)
// gives expr.
func Queries(files map[string][]byte) ([]Query, error) {
	queries, _, err := collect(files)
	return queries, err
}

// MetricNames returns the sorted, unique metric names that the queries of
// the files select, and that their label_values(selector, label) variables
// name. Each expression is parsed with Prometheus's parser once Grafana's
// macros and variables are replaced; suffixes such as _bucket stay as
// written.
func MetricNames(files map[string][]byte) ([]string, error) {
	queries, selectors, err := collect(files)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, q := range append(queries, selectors...) {
		expr, err := parse(q.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %s: %w", q.File, q.Panel, q.Expr, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				if name := metricName(vs); name != "" {
					names[name] = true
				}
			}
			return nil
		})
	}
	return slices.Sorted(maps.Keys(names)), nil
}

func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// The parts of Grafana's dashboard JSON model that hold queries.
type (
	jsonDashboard struct {
		UID        string      `json:"uid"`
		Panels     []jsonPanel `json:"panels"`
		Templating struct {
			List []jsonVariable `json:"list"`
		} `json:"templating"`
	}
	jsonPanel struct {
		Type       string       `json:"type"`
		Title      string       `json:"title"`
		Datasource *jsonRef     `json:"datasource"`
		Targets    []jsonTarget `json:"targets"`
		Panels     []jsonPanel  `json:"panels"` // of a collapsed row
	}
	jsonTarget struct {
		RefID      string   `json:"refId"`
		Expr       *string  `json:"expr"`
		Exemplar   bool     `json:"exemplar"`
		Datasource *jsonRef `json:"datasource"`
	}
	jsonVariable struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Query      json.RawMessage `json:"query"`
		Datasource *jsonRef        `json:"datasource"`
	}
)

// jsonRef is a data source reference: an object, or a name (old dashboards).
type jsonRef struct{ Type, UID string }

func (r *jsonRef) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		*r = jsonRef{UID: name}
		return nil
	}
	var ref struct{ Type, UID string }
	err := json.Unmarshal(b, &ref)
	*r = jsonRef(ref)
	return err
}

func decode(name string, b []byte) (jsonDashboard, error) {
	var d jsonDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// walk calls f for every panel, rows and the panels of collapsed rows
// included, in order.
func walk(panels []jsonPanel, f func(jsonPanel)) {
	for _, p := range panels {
		f(p)
		walk(p.Panels, f)
	}
}

// isPrometheus tells whether a reference (the first one set) is of a
// Prometheus data source; an unset one is the dashboard default.
func isPrometheus(refs ...*jsonRef) bool {
	for _, r := range refs {
		if r != nil && r.Type != "" {
			return r.Type == "prometheus"
		}
	}
	return true
}

var (
	labelValuesRE = regexp.MustCompile(`^\s*label_values\s*\(\s*(?:(.*\S)\s*,\s*)?[\w.]+\s*\)\s*$`)
	queryResultRE = regexp.MustCompile(`^\s*query_result\s*\((.*)\)\s*$`)
	grafanaFuncRE = regexp.MustCompile(`^\s*(label_names|metrics)\s*\(`)
)

// collect returns the PromQL queries of the files, and the series selectors
// of their label_values variables.
func collect(files map[string][]byte) (queries, selectors []Query, err error) {
	for _, file := range slices.Sorted(maps.Keys(files)) {
		d, err := decode(file, files[file])
		if err != nil {
			return nil, nil, err
		}
		walk(d.Panels, func(p jsonPanel) {
			for _, t := range p.Targets {
				if t.Expr != nil && isPrometheus(t.Datasource, p.Datasource) {
					queries = append(queries, Query{File: file, Panel: p.Title, RefID: t.RefID, Expr: *t.Expr})
				}
			}
		})
		for _, v := range d.Templating.List {
			if v.Type != "query" || !isPrometheus(v.Datasource) {
				continue
			}
			text, err := variableQuery(v.Query)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: variable %s: %w", file, v.Name, err)
			}
			q := Query{File: file, Panel: "variable " + v.Name}
			switch m := labelValuesRE.FindStringSubmatch(text); {
			case m != nil:
				if m[1] != "" {
					q.Expr = m[1]
					selectors = append(selectors, q)
				}
			case grafanaFuncRE.MatchString(text), strings.TrimSpace(text) == "":
			default:
				q.Expr = text
				if m := queryResultRE.FindStringSubmatch(text); m != nil {
					q.Expr = m[1]
				}
				queries = append(queries, q)
			}
		}
	}
	return queries, selectors, nil
}

// variableQuery is the text of a variable's query: a string, or the query
// field of an object (newer Grafana versions).
func variableQuery(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	err := json.Unmarshal(raw, &o)
	return o.Query, err
}

var (
	// $__rate_interval, ${__range_s}, …
	macroRE = regexp.MustCompile(`\$\{(__\w+)(?::[^}]*)?\}|\$(__\w+)`)
	// $namespace, ${namespace}, ${namespace:regex}, [[namespace]]
	variableRE = regexp.MustCompile(`\$\{\w+(?::[^}]*)?\}|\$\w+|\[\[\w+(?::\w+)?\]\]`)
	// =~"…" and !~"…" (and '…', `…`): where a variable stands for a regex
	regexMatcherRE = regexp.MustCompile("[=!]~\\s*(?:\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`)")
)

// substitute replaces Grafana's macros and variables in a PromQL expression
// with values the parser accepts: durations for $__rate_interval,
// $__interval and $__range (numbers for their _s and _ms forms), ".+" for a
// variable in a regex matcher, and "value" for any other variable.
func substitute(expr string) string {
	expr = macroRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(m, ":", 2)[0], "${"), "}")
		switch {
		case strings.HasSuffix(name, "_ms"):
			return "300000"
		case strings.HasSuffix(name, "_s"):
			return "300"
		default:
			return "5m"
		}
	})
	expr = regexMatcherRE.ReplaceAllStringFunc(expr, func(m string) string {
		return variableRE.ReplaceAllLiteralString(m, ".+")
	})
	return variableRE.ReplaceAllLiteralString(expr, "value")
}

var promql = parser.NewParser(parser.Options{})

// parse parses a dashboard's PromQL expression, macros and variables
// substituted.
func parse(expr string) (parser.Expr, error) {
	return promql.ParseExpr(substitute(expr))
}
