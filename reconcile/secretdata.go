package reconcile

import (
	"encoding/base64"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// secretData checks a desired Secret's data as the API server will decode
// it: every value a base64 string. Plain text under data (instead of
// stringData) is a common slip that the API server answers with a 500, as
// if it were down; it is an invalid manifest. The error names the Secret
// and the key, never the value. Any other object passes.
func secretData(u *unstructured.Unstructured) error {
	if u.GetKind() != "Secret" || u.GetAPIVersion() != "v1" {
		return nil
	}
	raw, ok := u.Object["data"]
	if !ok || raw == nil {
		return nil
	}
	data, ok := raw.(map[string]any)
	if !ok {
		return Invalid(&SecretKeyError{Secret: u.GetName(), Why: "data is not a map of keys to base64 values"})
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := data[k].(type) {
		case nil:
			// null: the API server stores an empty value.
		case string:
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return Invalid(&SecretKeyError{Secret: u.GetName(), Key: k,
					Why: "is not base64 (plain text goes under stringData, or encode it)"})
			}
		default:
			return Invalid(&SecretKeyError{Secret: u.GetName(), Key: k,
				Why: fmt.Sprintf("is not a string (a %s; values under data are base64 strings)", typeName(v))})
		}
	}
	return nil
}

// SecretKeyError is a desired Secret refused for what one of its keys
// holds. Its text names the Secret and the key, never the value, so it is
// shown wherever a tick's failure goes (the log, the Event, the page), where
// other errors about a Secret are not (Result.FailureText).
type SecretKeyError struct {
	Secret string // the Secret's name
	Key    string // "" when the fault is data itself
	Why    string
}

func (e *SecretKeyError) Error() string {
	if e.Key == "" {
		return "Secret/" + e.Secret + ": " + e.Why
	}
	return "Secret/" + e.Secret + ": data." + e.Key + " " + e.Why
}

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
