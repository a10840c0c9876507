package helm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/render"
)

// AnnotationGeneratedInputs records, on a chart's object with generated-once
// fields (Manifest.Generated), what each such field was made from besides
// the key and certificate makers: a JSON object from the field's JSON
// pointer to a fingerprint of its value in the render with stand-ins
// (helmfuncs.go). Stand-ins are the same in every render of the same
// inputs, so the fingerprint changes only when an ordinary input of the
// field does: a password hashed into a checksum annotation together with a
// generated certificate, a certificate's common name or validity, the
// password given to bcrypt or htpasswd. The diff keeps a generated field's
// live value only while its fingerprint is the one the live object
// records (GeneratedInputsChanged); an object without one (applied before
// recond recorded them) keeps its values.
const AnnotationGeneratedInputs = chartspec.AnnotationGeneratedInputs

// generatedInputs is the AnnotationGeneratedInputs value of an object whose
// fields paths the key and certificate makers reached, from its form in the
// render with stand-ins; "" when there is none to record. The fingerprint
// is keyed with key (the instance's seed) when the render decrypted a
// value, which a field may be made from: without it, a short and
// guessable decrypted password could be tried against the fingerprint.
func generatedInputs(standIn map[string]any, paths [][]string, key []byte) string {
	if len(paths) == 0 || len(paths) == 1 && len(paths[0]) == 0 {
		return ""
	}
	fp := map[string]string{}
	for _, p := range paths {
		v, _, _ := unstructured.NestedFieldNoCopy(standIn, p...)
		text, err := json.Marshal(v)
		if err != nil {
			continue
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte("recond generated inputs\x00"))
		mac.Write(text)
		fp[chartspec.JSONPointer(p)] = hex.EncodeToString(mac.Sum(nil)[:8])
	}
	out, _ := json.Marshal(fp)
	return string(out)
}

// GeneratedInputsChanged reports whether the generated-once field at path
// of an object is to be made again (chartspec.GeneratedInputsChanged).
func GeneratedInputsChanged(desired, live map[string]string, path []string) bool {
	return chartspec.GeneratedInputsChanged(desired, live, path)
}

// Apply gives m what the document's meta line says of it.
func (meta DocMeta) Apply(m *render.Manifest) {
	m.Hook, m.Generated = meta.Hook, meta.Generated
	if meta.Inputs != "" && m.Object != nil {
		a := m.Object.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationGeneratedInputs] = meta.Inputs
		m.Object.SetAnnotations(a)
	}
}
