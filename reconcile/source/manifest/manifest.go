package manifest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Manifest is one Kubernetes object read from the repository.
type Manifest struct {
	// File is the path of the file inside the repository, or
	// "kustomize build <path>" for objects produced by kustomize.
	File string
	// Object is the object exactly as written (no namespace is added).
	Object *unstructured.Unstructured
	// Hook marks a chart's hook (annotation helm.sh/hook) with a
	// pre-install, pre-upgrade, post-install or post-upgrade event: it is
	// run around the revision's other objects, not held like them.
	Hook bool
	// Generated are the fields of a chart's object (paths of keys; one
	// empty path: the whole object) that a key or certificate maker
	// (genCA, genPrivateKey, genSelfSignedCert, genSignedCert, ...) or a
	// random salt (bcrypt, htpasswd, encryptAES) made: their render cannot
	// be repeated, so they are written when the object is created and the
	// live values are kept after that.
	Generated [][]string
}

// ManifestError reports a manifest that cannot be read or is not a valid
// object. Render wraps it; use errors.As to get at it.
type ManifestError struct {
	// File is as in Manifest.File.
	File string
	// Object is "Kind/name", or as much of it as is known, or "".
	Object string
	Err    error
}

func (e *ManifestError) Error() string {
	if e.Object == "" {
		return e.File + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Object + ": " + e.Err.Error()
}

func (e *ManifestError) Unwrap() error { return e.Err }
