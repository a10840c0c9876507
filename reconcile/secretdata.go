package reconcile

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/record"
)

// secretData checks a desired Secret's data and stringData as the API
// server will decode them: every value of data a base64 string, every
// value of stringData a string. Plain text under data (instead of
// stringData), or an unquoted true or 8080 under stringData (a chart's
// value copied without `quote`), are common slips that the API server
// answers with a 500, as if it were down; they are an invalid manifest.
// The error names the Secret and the key, never the value. Any other
// object passes.
func secretData(u *unstructured.Unstructured) error {
	if u.GetKind() != "Secret" || u.GetAPIVersion() != "v1" {
		return nil
	}
	for _, field := range []string{"data", "stringData"} {
		raw, ok := u.Object[field]
		if !ok || raw == nil {
			continue
		}
		data, ok := raw.(map[string]any)
		if !ok {
			what := "base64 values"
			if field == "stringData" {
				what = "strings"
			}
			return Invalid(&SecretKeyError{Secret: u.GetName(), Field: field, Why: field + " is not a map of keys to " + what})
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if err := secretValue(u.GetName(), field, k, data[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// secretValue checks the value v of key k of a Secret's field (data or
// stringData).
func secretValue(secret, field, k string, v any) error {
	switch v := v.(type) {
	case nil:
		// null: the API server stores an empty value.
	case string:
		if field != "data" {
			return nil
		}
		if _, err := base64.StdEncoding.DecodeString(v); err != nil {
			return Invalid(&SecretKeyError{Secret: secret, Field: field, Key: k,
				Why: "is not base64 (plain text goes under stringData, or encode it)"})
		}
	default:
		why := fmt.Sprintf("is not a string (a %s; values under data are base64 strings)", typeName(v))
		if field == "stringData" {
			why = fmt.Sprintf("is not a string (a %s; quote it, as \"true\" or \"8080\", or with a chart's `quote`)", typeName(v))
		}
		return Invalid(&SecretKeyError{Secret: secret, Field: field, Key: k, Why: why})
	}
	return nil
}

// SecretKeyError is a desired Secret refused for what one of its keys
// holds (record.SecretKeyError).
type SecretKeyError = record.SecretKeyError

// typeName is a JSON type's name for a decoded value, never the value.
func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case map[string]any:
		return "map"
	case []any:
		return "list"
	case string:
		return "string"
	}
	return "number"
}
