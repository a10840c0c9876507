package sops

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"filippo.io/age"

	"recond.dev/recond/internal/reason"
)

// Format is the format of a SOPS-encrypted file, which decides where its
// metadata and values are.
type Format int

const (
	// YAML is one or more YAML documents, each a mapping.
	YAML Format = iota
	// JSON is one JSON object.
	JSON
	// Dotenv is KEY=value lines.
	Dotenv
	// Binary is any other file: sops stores its bytes as the one value of
	// a JSON object ({"data": ..., "sops": ...}).
	Binary
	// INI is an INI file: recognized, never decrypted.
	INI
)

// String names the format as sops's --input-type does.
func (f Format) String() string {
	switch f {
	case YAML:
		return "yaml"
	case JSON:
		return "json"
	case Dotenv:
		return "dotenv"
	case Binary:
		return "binary"
	case INI:
		return "ini"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// FormatOf is the format sops gives a file from its name: .yaml and .yml
// are YAML, .json JSON, .env dotenv, .ini INI, anything else binary.
func FormatOf(path string) Format {
	switch {
	case strings.HasSuffix(path, ".yaml"), strings.HasSuffix(path, ".yml"):
		return YAML
	case strings.HasSuffix(path, ".json"):
		return JSON
	case strings.HasSuffix(path, ".env"):
		return Dotenv
	case strings.HasSuffix(path, ".ini"):
		return INI
	}
	return Binary
}

// Encrypted reports whether data in format f carries SOPS metadata: a
// top-level "sops" mapping with "mac" and "lastmodified" (YAML: in any of
// its documents; JSON); a "sops_mac=" line (dotenv); a JSON object with
// "data" and such a "sops" (binary); a [sops] section with a mac (INI). It
// is cheap and never errors: data that does not parse is not encrypted
// (the caller's own decoder reports it). Encrypted does not validate the
// file; Decrypt does.
func Encrypted(f Format, data []byte) bool {
	switch f {
	case YAML:
		return yamlEncrypted(data)
	case JSON:
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			return false
		}
		return jsonMetadata(top["sops"])
	case Binary:
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			return false
		}
		_, ok := top["data"]
		return ok && jsonMetadata(top["sops"])
	case Dotenv:
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if bytes.HasPrefix(line, []byte(sopsPrefix+"mac=")) {
				return true
			}
		}
		return false
	case INI:
		return iniEncrypted(data)
	}
	return false
}

// jsonMetadata reports whether raw is a JSON object with "mac" and
// "lastmodified".
func jsonMetadata(raw json.RawMessage) bool {
	var md map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &md) != nil {
		return false
	}
	_, mac := md["mac"]
	_, lm := md["lastmodified"]
	return mac && lm
}

// iniEncrypted reports whether an INI file has a [sops] section with a
// mac entry, as sops writes it.
func iniEncrypted(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	inSops := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			inSops = line == "[sops]"
			continue
		}
		if k, _, ok := strings.Cut(line, "="); ok && inSops && strings.TrimSpace(k) == "mac" {
			return true
		}
	}
	return false
}

// Result is a decrypted file.
type Result struct {
	// Plain is the file in the same format with the sops metadata removed
	// and every value decrypted: YAML documents re-emitted (2-space indent,
	// comments dropped, plain values as written, decrypted values with
	// their type: a decrypted string always quoted or a block scalar; a
	// document left with no key, which sops wrote for an empty one, empty),
	// a JSON object with its keys in order (2-space indent), KEY=value
	// lines (a newline in a value written as \n, as sops does), or, for a
	// binary file, its bytes.
	Plain []byte
	// Values are the plaintexts of the values that were encrypted, in file
	// order, comments excluded: strings as they are, integers and floats
	// in decimal (strconv's 'f' format, shortest), booleans as true or
	// false, times in RFC 3339.
	Values []string
}

// Decrypt decrypts data, a file in format f, with the given identities
// (*age.X25519Identity and *age.HybridIdentity only), verifying its MAC and
// that each value is encrypted as the file's rule says. Its error is an
// *[Error].
func Decrypt(f Format, data []byte, ids []age.Identity) (*Result, error) {
	for _, id := range ids {
		switch id.(type) {
		case *age.X25519Identity, *age.HybridIdentity:
		default:
			return nil, &Error{Reason: ReasonAuth, Err: fmt.Errorf("an age identity of type %T is not supported: only X25519 (AGE-SECRET-KEY-1…) and ML-KEM-768+X25519 (AGE-SECRET-KEY-PQ-1…) identities are", id)}
		}
	}
	if len(ids) > maxIdentities {
		return nil, &Error{Reason: ReasonAuth, Err: fmt.Errorf("%d age identities, more than the %d allowed", len(ids), maxIdentities)}
	}
	var (
		res *Result
		err error
	)
	switch f {
	case YAML:
		res, err = decryptYAML(data, ids)
	case JSON:
		res, err = decryptJSON(data, ids, false)
	case Binary:
		res, err = decryptJSON(data, ids, true)
	case Dotenv:
		res, err = decryptDotenv(data, ids)
	case INI:
		return nil, invalidf("an encrypted INI file is not supported: encrypt it as YAML, JSON, dotenv or binary")
	default:
		return nil, invalidf("unknown format %v", f)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Reason classifies an [Error] (a value of internal/reason's set).
type Reason = reason.Reason

const (
	// ReasonInvalid is a file that is not a valid SOPS file, or that was
	// changed after sops wrote it: it fails whatever the keys.
	ReasonInvalid = reason.Invalid
	// ReasonAuth is a file that the identities given do not open.
	ReasonAuth = reason.Auth
)

// Error is why a file could not be decrypted. Its text names key paths,
// recipients and counts, never a value of the file nor a key.
type Error struct {
	Reason Reason
	// Recipients are what the data key was encrypted for and could not be
	// opened (Reason auth): age recipients as they are (age1…, age1pq1…
	// in full; the message abbreviates those), other master keys as
	// "<type> <id>" (pgp FINGERPRINT, kms ARN, gcp_kms resource ID,
	// azure_kv key URL, hc_vault key URL, hckms key ID). With key groups,
	// those of the groups that did not open.
	Recipients []string
	Err        error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "sops: " + string(e.Reason)
	}
	return "sops: " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// invalidf is an Error with reason invalid.
func invalidf(format string, args ...any) *Error {
	return &Error{Reason: ReasonInvalid, Err: fmt.Errorf(format, args...)}
}
