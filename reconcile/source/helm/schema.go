package helm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// validateSchemas checks values against each chart's values.schema.json,
// as Helm does (the chart's, then each dependency's with its part of the
// values), except that a $ref may only point inside the schema itself: a
// reference to a file, a URL or anything else fails the render, naming it,
// where Helm would read the file or fetch the URL.
func validateSchemas(ch *chartv2.Chart, values map[string]any) error {
	var sb strings.Builder
	validateChart(ch, values, &sb)
	if sb.Len() > 0 {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s", sb.String())
	}
	return nil
}

func validateChart(ch *chartv2.Chart, values map[string]any, sb *strings.Builder) {
	if len(ch.Schema) > 0 {
		if err := validateSchema(values, ch.Schema); err != nil {
			fmt.Fprintf(sb, "%s:\n%s\n", ch.Name(), err)
		}
	}
	for _, sub := range ch.Dependencies() {
		v, ok := values[sub.Name()]
		if !ok || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			fmt.Fprintf(sb, "%s:\ninvalid type for values: expected object (map), got %T\n", sub.Name(), v)
			continue
		}
		validateChart(sub, m, sb)
	}
}

// errRefOutside is a schema $ref that leaves the schema.
var errRefOutside = errors.New("a values schema may only refer to itself: recond reads no file and fetches no URL for it")

type refusingLoader struct{}

func (refusingLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("$ref %q: %w", u, errRefOutside)
}

const schemaURL = "file:///values.schema.json"

func validateSchema(values map[string]any, schema []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("unable to validate schema: %v", p)
		}
	}()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{"file": refusingLoader{}, "http": refusingLoader{}, "https": refusingLoader{}, "urn": refusingLoader{}})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	// The schema library wants JSON values: round-trip ints and the like.
	v, err := jsonValues(values)
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return schemaError(err)
	}
	return nil
}

// schemaError says where values broke the schema and which keyword, never
// the values themselves (the schema library quotes them, and a values file
// may hold a password).
func schemaError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return errors.New("values do not meet the schema")
	}
	var lines []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := "schema"
			if p := e.ErrorKind.KeywordPath(); len(p) > 0 {
				kw = strings.Join(p, "/")
			}
			lines = append(lines, fmt.Sprintf("- at '/%s': fails %q (value not shown)", strings.Join(e.InstanceLocation, "/"), kw))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("- and %d more", len(lines)-20))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// jsonValues is values as the schema library reads JSON (numbers as
// json.Number), through a JSON round trip, as Helm does.
func jsonValues(values map[string]any) (any, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
