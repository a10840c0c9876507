package sops

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// An encrypted value: ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<t>].
const (
	encPrefix = "ENC[AES256_GCM,"
	nonceSize = 32
	tagSize   = 16
	keySize   = 32
)

// encValue is a parsed ENC[...] value.
type encValue struct {
	data, iv, tag []byte
	typ           string
}

var errNotEnc = errors.New("not an ENC[AES256_GCM,…] value")

// parseEnc parses s, strictly: the four fields in sops's order, standard
// base64, a 32-byte nonce and a 16-byte tag. Its error never quotes s.
func parseEnc(s string) (*encValue, error) {
	rest, ok := strings.CutPrefix(s, encPrefix+"data:")
	if !ok {
		return nil, errNotEnc
	}
	rest, ok = strings.CutSuffix(rest, "]")
	if !ok {
		return nil, errNotEnc
	}
	parts := strings.Split(rest, ",")
	if len(parts) != 4 {
		return nil, errNotEnc
	}
	iv, ok1 := strings.CutPrefix(parts[1], "iv:")
	tag, ok2 := strings.CutPrefix(parts[2], "tag:")
	typ, ok3 := strings.CutPrefix(parts[3], "type:")
	if !ok1 || !ok2 || !ok3 {
		return nil, errNotEnc
	}
	v := &encValue{typ: typ}
	var err error
	if v.data, err = base64.StdEncoding.DecodeString(parts[0]); err != nil || len(v.data) == 0 {
		return nil, errNotEnc
	}
	if v.iv, err = base64.StdEncoding.DecodeString(iv); err != nil || len(v.iv) != nonceSize {
		return nil, errNotEnc
	}
	if v.tag, err = base64.StdEncoding.DecodeString(tag); err != nil || len(v.tag) != tagSize {
		return nil, errNotEnc
	}
	return v, nil
}

// newAEAD is AES-256-GCM with sops's 32-byte nonce.
func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithNonceSize(block, nonceSize)
}

// open authenticates and decrypts v with aad.
func (v *encValue) open(aead cipher.AEAD, aad string) ([]byte, error) {
	ct := make([]byte, 0, len(v.data)+len(v.tag))
	ct = append(append(ct, v.data...), v.tag...)
	return aead.Open(nil, v.iv, ct, []byte(aad))
}

// comment is a decrypted value of type comment.
type comment struct{}

// typed converts a decrypted plaintext to the value its type names, as
// sops does (strconv's parsers: an int is a Go int, a float a float64).
func typed(typ string, pt []byte) (any, error) {
	s := string(pt)
	switch typ {
	case "str", "bytes":
		return s, nil
	case "int":
		return strconv.Atoi(s)
	case "float":
		return strconv.ParseFloat(s, 64)
	case "bool":
		return strconv.ParseBool(s)
	case "time":
		var t time.Time
		if err := t.UnmarshalText(pt); err != nil {
			return nil, err
		}
		return t, nil
	case "comment":
		return comment{}, nil
	}
	return nil, errors.New("unknown type")
}

// macBytes is what the MAC hashes for a value, as sops's ToBytes: strings
// raw, integers in decimal, floats in 'f' format (shortest), booleans as
// True and False (Python sops's spelling), times as MarshalText writes
// them.
func macBytes(v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return []byte(v), true
	case int:
		return []byte(strconv.Itoa(v)), true
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), true
	case bool:
		if v {
			return []byte("True"), true
		}
		return []byte("False"), true
	case time.Time:
		b, err := v.MarshalText()
		return b, err == nil
	}
	return nil, false
}

// valueText is a decrypted value as Result.Values holds it.
func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return ""
}
