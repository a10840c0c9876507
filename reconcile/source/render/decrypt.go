package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"filippo.io/age"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/sops"
)

// A revision's SOPS-encrypted files are decrypted as they are read, in the
// render (in its worker process when there is one), with the age keys of
// Config.SOPSAgeKeysFile, read at every render: see docs/secrets.md. What
// a file may hold depends on what reads it (Role):
//
//   - a manifest (the plain reader's files, a kustomization's resources
//     and patches): YAML or JSON whose every document is a core/v1
//     Secret, so that a decrypted value only ever lands where every output
//     masks it;
//   - a secretGenerator's file or env: any format SOPS writes (by the
//     file's extension: YAML, JSON, dotenv, binary), secret as a whole;
//   - a Helm values file (--helm-values, a helmCharts entry's values
//     files): YAML, its encrypted values secret wherever a template copies
//     them (Source.Sensitive);
//   - a configMapGenerator's file or env: never encrypted.
//
// The MAC is always verified (package sops). A file that cannot be
// decrypted fails the render: reason invalid (a *ManifestError) when it is
// malformed, tampered with or not allowed where it is read, reason auth (an
// *Error) when no key opens it. Both name the file, never a value.

// Role is what a file of the revision is read as; a file read in
// several ways has each of its roles (a set), and each role's rule holds.
// An encrypted file without a role (read by what no kustomization entry
// names: a builtin generator's or transformer's configuration) is refused.
type Role uint8

// The roles of a file.
const (
	RoleManifest  Role = 1 << iota // a manifest: only Secrets may be encrypted
	RoleGenerator                  // a secretGenerator's source: secret as a whole
	RoleValues                     // a Helm values file: its encrypted values are secret
	RolePlain                      // a configMapGenerator's source, a patch: never encrypted
)

// decryption is one render's SOPS state: its keys, what each file is read
// as, the files decrypted so far and the values that became secret. The
// zero value decrypts nothing (every encrypted file fails with auth). Safe
// for concurrent use.
type decryption struct {
	// keys is the keys file's content as read when the render started
	// (nil with keysErr: it could not be read; both nil: none given).
	keys     []byte
	keysErr  error
	keysFile string

	idsOnce sync.Once
	ids     []age.Identity
	idsErr  error

	mu       sync.Mutex
	roles    map[string]Role
	plainWhy map[string]string       // what reads a RolePlain file
	opened   map[string]*sops.Result // decrypted files, by repository path and format
	values   []string                // decrypted values that are secret
}

// maxSensitiveValues bounds the values a revision may decrypt that are
// secret wherever they appear: each is looked for in every object that
// holds one, at every new revision.
const maxSensitiveValues = 1024

// readKeys reads the keys file named by file ("" for none) into d.
func (d *decryption) readKeys(file string) {
	d.keysFile = file
	d.keys, d.keysErr = manifest.ReadKeys(file)
}

// fingerprint identifies the keys a render used (manifest.Fingerprint).
func (d *decryption) fingerprint() [32]byte { return manifest.Fingerprint(d.keys, d.keysErr) }

// identities parses the keys once per render, when a file needs them.
func (d *decryption) identities() ([]age.Identity, error) {
	d.idsOnce.Do(func() {
		switch {
		case d.keysErr != nil:
			d.idsErr = d.keysErr
		case d.keysFile == "" && d.keys == nil:
			d.idsErr = fmt.Errorf("no age keys: recond decrypts SOPS files with the keys of --%s", FlagSOPSAgeKeysFile)
		default:
			d.ids, d.idsErr = sops.ParseIdentities(d.keys)
			if d.idsErr != nil {
				d.idsErr = fmt.Errorf("the age keys file (--%s): %w", FlagSOPSAgeKeysFile, d.idsErr)
			}
		}
	})
	return d.ids, d.idsErr
}

// setRole records that the file at p (a repository path, links resolved)
// is read as r, besides what it was read as before.
func (d *decryption) setRole(p string, r Role) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.roles == nil {
		d.roles = map[string]Role{}
	}
	d.roles[p] |= r
}

// setPlain records that the file at p is read as why, which may not be
// encrypted (RolePlain).
func (d *decryption) setPlain(p, why string) {
	d.setRole(p, RolePlain)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plainWhy == nil {
		d.plainWhy = map[string]string{}
	}
	if _, ok := d.plainWhy[p]; !ok {
		d.plainWhy[p] = why
	}
}

// shareWith gives n, the decryption of a second render of the same
// revision (with other inputs), d's keys and the files d decrypted so far.
func (d *decryption) shareWith(n *decryption) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n.keys, n.keysErr, n.keysFile = d.keys, d.keysErr, d.keysFile
	n.roles, n.plainWhy, n.opened = maps.Clone(d.roles), maps.Clone(d.plainWhy), maps.Clone(d.opened)
}

func (d *decryption) role(p string) (Role, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.roles[p], d.plainWhy[p]
}

// addValues records decrypted values that are secret; more than
// maxSensitiveValues in one render is an error.
func (d *decryption) addValues(vs ...string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			d.values = append(d.values, v)
		}
	}
	if len(d.values) > maxSensitiveValues {
		slices.Sort(d.values)
		d.values = slices.Compact(d.values)
		if len(d.values) > maxSensitiveValues {
			return fmt.Errorf("the revision decrypts more than %d values that are secret: recond masks each of them wherever it "+
				"appears, and holds at most %d; keep fewer secrets per repository path", maxSensitiveValues, maxSensitiveValues)
		}
	}
	return nil
}

// secretValues are the decrypted values that are secret, each once.
func (d *decryption) secretValues() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.values)
	slices.Sort(out)
	return slices.Compact(out)
}

// MaybeSOPS is a cheap look for what a SOPS file holds, whole or in
// part: its metadata's name with its mac or lastmodified, or an encrypted
// value (sops.MayHold).
func MaybeSOPS(data []byte) bool { return sops.MayHold(data) }

// Decrypt returns the content of file (a repository path, links resolved)
// decrypted when it is SOPS-encrypted, else data itself. Each call checks
// the file against every role it has then (a later kustomization may read
// it in another way); the decryption itself is done once per render.
func (b *Budget) Decrypt(file string, data []byte) ([]byte, error) {
	if !MaybeSOPS(data) {
		return data, nil
	}
	d := &b.dec
	roles, why := d.role(file)
	byName, byContent := sops.FormatOf(file), sops.YAML
	if looksLikeJSON(data) {
		byContent = sops.JSON
	}
	// A secretGenerator's source is read as SOPS names its format (by its
	// extension); anything else as YAML or JSON whatever the name, as
	// kustomize and Helm read it.
	format := byContent
	if roles == RoleGenerator {
		format = byName
	}
	invalid := func(err error) error {
		return &ManifestError{File: file, Err: &DecryptError{File: file, Err: err}}
	}
	if !sops.Encrypted(format, data) {
		if roles&RolePlain != 0 && sops.Encrypted(byName, data) {
			// Not read as such, but encrypted all the same.
			return nil, invalid(fmt.Errorf("SOPS-encrypted, but read as %s, which may not be encrypted: "+
				"a decrypted value must never land in an object that is not a Secret", why))
		}
		// What is left of a SOPS file whose metadata was removed or cut
		// (by hand, by a merge) would give its ciphertext as values.
		if err := sops.Stripped(format, data); err != nil {
			return nil, invalid(fmt.Errorf("SOPS-encrypted in part: %w", err))
		}
		return data, nil
	}
	switch {
	case roles&RolePlain != 0:
		return nil, invalid(fmt.Errorf("SOPS-encrypted, but read as %s, which may not be encrypted: "+
			"a decrypted value must never land in an object that is not a Secret", why))
	case roles == 0:
		// Read by something no kustomization entry names (a generator's or
		// transformer's own configuration, a chart's .helmignore).
		return nil, invalid(errors.New("SOPS-encrypted, but read as neither a manifest, a secretGenerator's source nor a " +
			"Helm values file: only those may be encrypted"))
	case format == sops.INI:
		return nil, invalid(errors.New("SOPS-encrypted as INI, which recond does not decrypt: encrypt it as YAML, JSON, dotenv or binary"))
	}
	res, err := b.open(file, format, data)
	if err != nil {
		return nil, err
	}
	var values []string
	if roles&RoleManifest != 0 {
		v, err := secretDocuments(res.Plain)
		if err != nil {
			return nil, invalid(err)
		}
		values = append(values, v...)
	}
	if roles&RoleValues != 0 {
		values = append(values, res.Values...)
		for _, v := range res.Values {
			b.secrets.AddGenerated(v)
		}
	}
	if roles&RoleGenerator != 0 {
		// Marked secret as a whole (checkSecretSources): inspect adds it to
		// the secret material; as the value of a Secret's key it is secret
		// wherever it is copied, and so is each value of an env file.
		values = append(values, string(res.Plain))
		if format == sops.Dotenv {
			for _, line := range strings.Split(string(res.Plain), "\n") {
				if _, v, ok := strings.Cut(strings.TrimSuffix(line, "\r"), "="); ok {
					values = append(values, v)
				}
			}
		}
		b.secrets.addFile(file, res.Plain)
	}
	if err := d.addValues(values...); err != nil {
		return nil, invalid(err)
	}
	return res.Plain, nil
}

// open decrypts data (file, in format) once per render.
func (b *Budget) open(file string, format sops.Format, data []byte) (*sops.Result, error) {
	d := &b.dec
	key := file + "\x00" + format.String()
	d.mu.Lock()
	res, done := d.opened[key]
	d.mu.Unlock()
	if done {
		return res, nil
	}
	if format == sops.YAML || format == sops.JSON {
		// The encrypted file is bounded like any other before it is parsed.
		if err := b.Inspect(file, data, false); err != nil {
			var se *syntaxError
			if !errors.As(err, &se) {
				return nil, err
			}
		}
	}
	ids, idsErr := d.identities()
	res, err := sops.Decrypt(format, data, ids)
	if err != nil {
		var se *sops.Error
		if idsErr != nil && !(errors.As(err, &se) && se.Reason == sops.ReasonInvalid) {
			// Without keys, only what makes the file invalid whatever the
			// keys (its metadata, its form) is told before the keys are.
			return nil, &reason.Error{Reason: reason.Auth, Err: &DecryptError{File: file, Err: fmt.Errorf("%s: SOPS-encrypted: %w", file, idsErr)}}
		}
		if errors.As(err, &se) && se.Reason == sops.ReasonAuth {
			return nil, &reason.Error{Reason: reason.Auth, Err: &DecryptError{File: file, Recipients: se.Recipients,
				Err: fmt.Errorf("%s: SOPS-encrypted: %w", file, err)}}
		}
		return nil, &ManifestError{File: file, Err: &DecryptError{File: file, Err: fmt.Errorf("SOPS-encrypted: %w", err)}}
	}
	d.mu.Lock()
	if d.opened == nil {
		d.opened = map[string]*sops.Result{}
	}
	d.opened[key] = res
	d.mu.Unlock()
	return res, nil
}

// secretDocuments checks that every document of a decrypted manifest file
// is a core/v1 Secret and returns the values of their data (decoded too)
// and stringData.
func secretDocuments(plain []byte) ([]string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(plain), 4096)
	var values []string
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return values, nil
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if raw = bytes.TrimSpace(raw); len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("document %d: not an object", doc)
		}
		kind, _ := obj["kind"].(string)
		version, _ := obj["apiVersion"].(string)
		if kind != "Secret" || version != "v1" {
			// Not its name: it may have been encrypted.
			return nil, fmt.Errorf("document %d (kind %s) is SOPS-encrypted, but only Secrets (apiVersion v1, kind Secret) may be: "+
				"a decrypted value must never be shown; keep other objects in plain files", doc, safeKind(kind))
		}
		for _, field := range []string{"data", "stringData"} {
			m, _ := obj[field].(map[string]any)
			for _, v := range m {
				s, ok := v.(string)
				if !ok {
					continue
				}
				values = append(values, s)
				if field == "data" {
					if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil {
						values = append(values, string(b))
					}
				}
			}
		}
	}
}

// safeKind is a kind as an error may quote it: what a kind may hold (an
// encrypted file's kind is a decrypted value: anything else is cut).
func safeKind(k string) string {
	if k == "" {
		return `""`
	}
	for i, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') || i >= 63 {
			return k[:i] + "…"
		}
	}
	return k
}

// ReadKeys reads the age keys file named by file ("" for none): the keys
// the render decrypts with. A file that cannot be read fails, with reason
// auth, only the files that need a key.
func (b *Budget) ReadKeys(file string) { b.dec.readKeys(file) }

// SetKeys gives the render the keys file's content as another process read
// it (keys, or why it could not: keysErr) and its name.
func (b *Budget) SetKeys(keys []byte, file string, keysErr error) {
	b.dec.keys, b.dec.keysFile, b.dec.keysErr = keys, file, keysErr
}

// Keys is the keys file's content as the render read it, its name, and why
// it could not be read.
func (b *Budget) Keys() (keys []byte, file string, keysErr error) {
	return b.dec.keys, b.dec.keysFile, b.dec.keysErr
}

// KeysFingerprint identifies the keys the render used: a changed keys file
// (or a change in whether it can be read) changes it.
func (b *Budget) KeysFingerprint() [32]byte { return b.dec.fingerprint() }

// SetRole records that the file at p (a repository path, links resolved)
// is read as r, besides what it was read as before.
func (b *Budget) SetRole(p string, r Role) { b.dec.setRole(p, r) }

// SetPlain records that the file at p is read as why, which may not be
// encrypted (RolePlain).
func (b *Budget) SetPlain(p, why string) { b.dec.setPlain(p, why) }

// SecretValues are the decrypted values that are secret wherever they
// appear, each once.
func (b *Budget) SecretValues() []string { return b.dec.secretValues() }

// AddSensitive adds values decrypted elsewhere (a render worker's) to the
// render's: secret wherever they appear, and never quoted by its errors.
// More than the render may hold is an error.
func (b *Budget) AddSensitive(values ...string) error {
	if err := b.dec.addValues(values...); err != nil {
		return err
	}
	for _, v := range values {
		b.secrets.AddGenerated(v)
	}
	return nil
}
