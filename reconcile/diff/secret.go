package diff

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// secretFields are the paths of a Secret whose values are never shown: the
// data, and the copy of the whole object kubectl apply leaves behind.
var secretFields = []string{
	"data", "stringData",
	"metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
}

// isSecret reports whether gvk is a core/v1 Secret.
func isSecret(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// processSalt salts masks when Options.SecretSalt is empty.
var processSalt = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
})

// mask returns v, the value of a Secret at path, with every value under a
// secret field replaced by its mask. v itself is never modified (it belongs
// to the object that is written): maps on the way are copied.
func (w *walker) mask(path string, v any) any {
	if v == nil {
		return nil
	}
	for _, f := range secretFields {
		if within(path, f) {
			return w.maskAll(path, v)
		}
	}
	m, ok := v.(map[string]any)
	if !ok || !aboveSecret(path) {
		return v
	}
	out := make(map[string]any, len(m))
	for k, c := range m {
		out[k] = w.mask(join(path, k), c)
	}
	return out
}

// aboveSecret reports whether a secret field lies under path.
func aboveSecret(path string) bool {
	for _, f := range secretFields {
		if path == "" || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}

// maskAll masks every value in v, keeping the keys of maps and leaving
// absent (nil) values absent.
func (w *walker) maskAll(path string, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = w.maskAll(join(path, k), c)
		}
		return out
	}
	return Mask(w.salt, secretBytes(path, v))
}

// secretBytes is what the mask of v at path hashes: a data value decoded
// from base64, so that it masks like the same value in stringData; a string
// as it is; anything else as JSON.
func secretBytes(path string, v any) []byte {
	if s, ok := v.(string); ok {
		if within(path, "data") {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return b
			}
		}
		return []byte(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Append(nil, v)
	}
	return b
}

// Mask returns what stands for a secret value in a difference:
// "<secret sha256:3f2a9c1e>", the first eight hex digits of the SHA-256 of
// salt followed by value. An empty salt uses the process's random salt.
func Mask(salt, value []byte) string {
	if len(salt) == 0 {
		salt = processSalt()
	}
	h := sha256.New()
	h.Write(salt)
	h.Write(value)
	return fmt.Sprintf("<secret sha256:%x>", h.Sum(nil)[:4])
}

// changeJSON is how a Change marshals: without the objects.
type changeJSON struct {
	Kind      string      `json:"kind"`
	Name      string      `json:"name"`
	Action    Action      `json:"action"`
	Uncertain bool        `json:"uncertain,omitempty"`
	Fields    []FieldDiff `json:"fields,omitempty"`
}

// MarshalJSON writes the change's identity, action and differences, never
// its Desired and Live objects, which carry a Secret's values.
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(changeJSON{Kind: c.Kind, Name: c.Name, Action: c.Action, Uncertain: c.Uncertain, Fields: c.Fields})
}

// LogValue logs the change as String renders it, never its Desired and Live
// objects.
func (c Change) LogValue() slog.Value { return slog.StringValue(c.String()) }

// GoString renders the change for %#v without its Desired and Live objects.
func (c Change) GoString() string {
	return fmt.Sprintf("diff.Change{Kind:%q, Name:%q, Action:%q, Uncertain:%t, Fields:%#v}",
		c.Kind, c.Name, c.Action, c.Uncertain, c.Fields)
}
