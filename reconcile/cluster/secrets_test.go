package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"recond.dev/recond/internal/redact/redacttest"
)

func secretWith(name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}, "data": data,
	}}
}

// The API server's answer to a Secret it refuses, against the real
// server: an env file's line "DB_PASSWORD: <value>" became a key, which
// the server quotes whole. The error names the Secret, the reason and the
// key's name, never the value, and is still classified by its status.
func TestSecretApplyErrorQuotesNoValue(t *testing.T) {
	cp.Require(t)
	c, err := New(cp.Config, cp.Namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	c.SetGate(allowAll{})
	v := redacttest.Value(t)
	for _, dryRun := range []bool{true, false} {
		_, err = c.Apply(context.Background(), secretWith("db", map[string]any{"DB_PASSWORD: " + v: ""}), dryRun)
		if err == nil {
			t.Fatal("the server accepted a key with a colon and a space")
		}
		for _, s := range []string{err.Error(), fmt.Sprintf("%v %+v %q", err, err, err)} {
			if strings.Contains(s, v) {
				t.Errorf("error quotes the value: %s", s)
			}
		}
		for _, want := range []string{"apply Secret/db", "Invalid (422)", "data[DB_PASSWORD…]", "FieldValueInvalid"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		var se *SecretError
		if !errors.As(err, &se) || !apierrors.IsInvalid(err) {
			t.Errorf("error %#v is not a *SecretError classified as invalid", err)
		}
	}
	// Any other kind keeps the server's message.
	cm := secretWith("cm", map[string]any{"bad key": "x"})
	cm.SetKind("ConfigMap")
	if _, err := c.Apply(context.Background(), cm, true); err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("ConfigMap error = %v, want the server's message", err)
	}
}

// allowAll is a gate that lets every write through: these tests are about
// what the API server answers.
type allowAll struct{}

func (allowAll) Admit(context.Context, Write) (func(error), error) { return func(error) {}, nil }

func TestSecretSafe(t *testing.T) {
	const v = "Hunter2-xyz"
	secret := secretWith("db", map[string]any{"k": base64.StdEncoding.EncodeToString([]byte(v))})
	gk := schema.GroupKind{Kind: "Secret"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"invalid key", apierrors.NewInvalid(gk, "db", field.ErrorList{
			field.Invalid(field.NewPath("data").Key("DB_PASSWORD: "+v), "DB_PASSWORD: "+v, "a valid config key must consist of ..."),
			field.Invalid(field.NewPath("data").Key("PIN "+v), "PIN "+v, "a valid config key"),
			field.Required(field.NewPath("metadata", "name"), ""),
		}), "apply Secret/db: Invalid (422): data[DB_PASSWORD…] FieldValueInvalid; data[PIN…] FieldValueInvalid; metadata.name FieldValueRequired (the API server's message about a Secret is not shown: it may quote a value)"},
		{"admission webhook quoting a value", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db",
			fmt.Errorf("admission webhook \"policy.example.com\" denied the request: password %q is too weak", v)),
			"apply Secret/db: Forbidden (403) (the API server's message about a Secret is not shown: it may quote a value)"},
		{"data not base64", apierrors.NewInternalError(errors.New("illegal base64 data at input byte 4")),
			"apply Secret/db: InternalError (500): data is not base64 (illegal base64 data) (the API server's message about a Secret is not shown: it may quote a value)"},
		{"no status", context.DeadlineExceeded, "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := secretSafe("apply", secret, tt.err)
			if got.Error() != tt.want {
				t.Errorf("secretSafe() = %q\nwant          %q", got, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Error("secretSafe() does not wrap the server's error")
			}
		})
	}
	cm := secretWith("cm", nil)
	cm.SetKind("ConfigMap")
	err := apierrors.NewBadRequest("x " + v)
	if got := secretSafe("apply", cm, err); got != err {
		t.Errorf("secretSafe(ConfigMap) = %v, want the error as it is", got)
	}
}

// fakeSensitive holds one value: objects whose data mentions it hold one.
type fakeSensitive struct{ v string }

func (f fakeSensitive) Holds(u *unstructured.Unstructured) bool {
	js, _ := u.MarshalJSON()
	return strings.Contains(string(js), f.v)
}
func (f fakeSensitive) Redact(s string) string { return strings.ReplaceAll(s, f.v, "<redacted>") }

// An object that holds a decrypted value has its errors concealed like a
// Secret's, and what the concealed text still says (a cause's field path,
// where a key is the value) loses the value; an object that holds none
// keeps the server's message.
func TestConcealedErrorsOfObjectsHoldingADecryptedValue(t *testing.T) {
	cp.Require(t)
	c, err := New(cp.Config, cp.Namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	v := redacttest.Value(t)
	c.ConcealErrorsOf(fakeSensitive{v})
	cm := secretWith("cm", map[string]any{v + " key": "x"}) // a key a ConfigMap may not hold, that is the value
	cm.SetKind("ConfigMap")
	_, err = c.Apply(context.Background(), cm, true)
	if err == nil {
		t.Fatal("the server accepted a key with a space")
	}
	var se *SecretError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "apply ConfigMap/cm") ||
		!strings.Contains(err.Error(), "decrypted value") {
		t.Errorf("error %q is not concealed as a *SecretError about ConfigMap/cm", err)
	}
	if s := fmt.Sprintf("%v %+v %q", err, err, err); strings.Contains(s, v) {
		t.Errorf("error quotes the value: %s", s)
	}
	other := secretWith("other", map[string]any{"bad key": "x"})
	other.SetKind("ConfigMap")
	if _, err := c.Apply(context.Background(), other, true); err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("an object holding no value lost the server's message: %v", err)
	}
}
