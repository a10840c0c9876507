// Package redact removes secret values from what recond shows: its logs
// and client-go's, Events, spans, the status page and its JSON, `recond
// diff` in text and JSON, and the texts of errors, the API server's and the
// parsers'. It is the one place that knows how a secret value may look in
// an output, and it has the one word rule.
//
// A Set holds the values recond knows to be secret (what it decrypted, a
// Secret's data, what a secretGenerator is made of) in every form an
// output may show them (New):
//
//   - as they are; a multi-line value whole (whatever the indentation of
//     its lines) and line by line;
//   - base64-encoded, with and without a trailing newline (b64enc, a
//     Secret's data, a ConfigMap's binaryData);
//   - as JSON and Go quote them (toJson, %q, %+q, a JSON log line), and as
//     JSON quotes that again (an error quoting JSON, logged as JSON);
//   - a number as Helm prints it after reading it from a values file as a
//     float64 (12345679 → 1.2345679e+07), in each of strconv's and fmt's
//     forms, and an integer as YAML 1.1 reads it (0x1F, 017);
//   - after a YAML indicator, as a parser quotes a value that starts with
//     one: "*x" is an alias ("unknown anchor 'x' referenced"), "!!int x" a
//     tag ("cannot decode !!str `x` as a !!int"), "&x" an anchor.
//
// Redact replaces each form with Mask, longest first (a value inside
// another does not leave the rest of the longer one behind). A value of
// MinLength bytes or more is replaced wherever it appears; a shorter one
// only where it stands as a word of its own (Word: letters and digits of
// any script, and '_'), so that a value "42" is removed from "port 42" and
// "port-42" and never from "1425". Contains and In answer whether a text
// or a decoded value holds one of the values (a line of a multi-line value
// counts only when it is key material, the body of a PEM block or a key:
// an armor line or a line of JSON is in other texts too); Error is Redact
// for an error's text.
//
// A value a template transforms otherwise (upper-cased, hashed, a part of
// it encoded) is not recognised: docs/secrets.md says to keep decrypted
// values in Secrets, and the outputs that know they show secret material
// (a Secret's data in a difference, a parser's message about a document
// that holds one, the API server's message about a Secret) show none of it
// whatever this package finds.
//
// SafeKey shows a key that may be a value written the wrong way (an env
// file's line "DB_PASSWORD: Hunter2" made a key): whole when a Secret may
// hold it, else cut before its first character a key may not hold.
//
// NewHandler passes every record of a slog.Handler through a Set.
//
// The package is a leaf: it imports the standard library only.
package redact
