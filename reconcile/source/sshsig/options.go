package sshsig

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// parseOptions reads a line's comma-separated options into sg: namespaces,
// valid-after and valid-before, each at most once, with its value in
// double quotes; names are matched without regard to case, as ssh-keygen
// does.
func parseOptions(opts string, sg *Signer) error {
	seen := map[string]bool{}
	for s := opts; ; {
		end := strings.IndexAny(s, "=,")
		if end < 0 {
			end = len(s)
		}
		name := strings.ToLower(s[:end])
		s = s[end:]
		switch name {
		case "cert-authority":
			return errors.New("option cert-authority is not supported: list each signer's own key")
		case "namespaces", "valid-after", "valid-before":
		default:
			if len(seen) == 0 && !strings.ContainsAny(opts, "=,") {
				return fmt.Errorf("%q is neither a supported key type nor an option (namespaces, valid-after, valid-before)", opts)
			}
			return fmt.Errorf("unknown option %q (known: namespaces, valid-after, valid-before)", s0(name))
		}
		if seen[name] {
			return fmt.Errorf("option %s is given twice", name)
		}
		seen[name] = true
		if !strings.HasPrefix(s, "=") {
			return fmt.Errorf(`option %s needs a value: %s="..."`, name, name)
		}
		value, rest, err := dequote(s[1:])
		if err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
		s = rest
		switch name {
		case "namespaces":
			sg.Namespaces = strings.Split(value, ",")
		case "valid-after":
			if sg.ValidAfter, err = parseTime(value); err != nil {
				return fmt.Errorf("option valid-after: %w", err)
			}
		case "valid-before":
			if sg.ValidBefore, err = parseTime(value); err != nil {
				return fmt.Errorf("option valid-before: %w", err)
			}
		}
		if s == "" {
			break
		}
		if s[0] != ',' {
			return fmt.Errorf("option %s: unexpected %q after its quoted value", name, s)
		}
		if s = s[1:]; s == "" {
			return errors.New("the options end with a comma")
		}
	}
	if !sg.ValidAfter.IsZero() && !sg.ValidBefore.IsZero() && !sg.ValidBefore.After(sg.ValidAfter) {
		return fmt.Errorf("valid-before (%s) is not after valid-after (%s)", utc(sg.ValidBefore), utc(sg.ValidAfter))
	}
	return nil
}

// s0 is name, or a word for it when it is empty.
func s0(name string) string {
	if name == "" {
		return "(empty)"
	}
	return name
}

// dequote reads a double-quoted value at the start of s, where \" stands
// for a quote, and returns it with what follows the closing quote.
func dequote(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New(`the value must be in double quotes`)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case s[i] == '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("the quoted value has no closing quote")
}

// parseTime reads a time as ssh-keygen does: YYYYMMDD, YYYYMMDDHHMM or
// YYYYMMDDHHMMSS, in the local time zone, or in UTC when followed by Z or
// UTC.
func parseTime(s string) (time.Time, error) {
	v, loc := s, time.Local
	switch {
	case len(v) > 1 && strings.EqualFold(v[len(v)-1:], "Z"):
		v, loc = v[:len(v)-1], time.UTC
	case len(v) > 3 && strings.EqualFold(v[len(v)-3:], "UTC"):
		v, loc = v[:len(v)-3], time.UTC
	}
	layout := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}[len(v)]
	if layout == "" || strings.Trim(v, "0123456789") != "" {
		return time.Time{}, fmt.Errorf("%q is not a time of the form YYYYMMDD[HHMM[SS]][Z]", s)
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time of the form YYYYMMDD[HHMM[SS]][Z]: %w", s, err)
	}
	return t, nil
}

// utc formats t for an error message.
func utc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// matchList reports whether s matches the patterns as ssh-keygen's
// match_pattern_list does: some pattern matches it and no negated one
// ("!pattern") does.
func matchList(s string, patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if match(s, p) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// match reports whether s matches the pattern p, where * matches any run
// of bytes and ? any one byte.
func match(s, p string) bool {
	// Iterative, backtracking to the last star only: linear in practice.
	si, pi, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
