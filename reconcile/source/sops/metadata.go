package sops

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Bounds on the metadata, so that a file cannot make decryption costly.
const (
	maxMasterKeys = 64  // master keys of every group together
	maxGroups     = 16  // key groups
	maxRuleLen    = 256 // length of a rule's suffix or regular expression
	maxRuleInst   = 256 // instructions of a rule's compiled regular expression (its cost per byte tested)
)

// sopsKey is the metadata's key in YAML and JSON; sopsPrefix starts its
// flattened keys in dotenv.
const (
	sopsKey    = "sops"
	sopsPrefix = "sops_"
)

// metadata is what Decrypt reads of a file's sops metadata.
type metadata struct {
	mac             string
	lastModifiedAAD string // lastmodified re-formatted in RFC 3339, as sops authenticates it
	macOnly         bool
	rules           *rules
	groups          [][]masterKey
	threshold       int
}

// masterKey is one entry of a key group.
type masterKey struct {
	typ  string // age, pgp, kms, gcp_kms, azure_kv, hc_vault, hckms
	name string // what it is encrypted for, as errors name it
	enc  string // the wrapped data key (age: an armored age file)
}

// keyTypes are the master key lists sops writes, each with how an entry is
// named.
var keyTypes = []struct {
	field string
	name  func(map[string]any) string
}{
	{"age", func(m map[string]any) string { return str(m["recipient"]) }},
	{"pgp", func(m map[string]any) string { return "pgp " + str(m["fp"]) }},
	{"kms", func(m map[string]any) string { return "kms " + str(m["arn"]) }},
	{"gcp_kms", func(m map[string]any) string { return "gcp_kms " + str(m["resource_id"]) }},
	{"azure_kv", func(m map[string]any) string {
		return "azure_kv " + strings.TrimSuffix(str(m["vault_url"]), "/") + "/keys/" + str(m["name"]) + "/" + str(m["version"])
	}},
	{"hc_vault", func(m map[string]any) string {
		return "hc_vault " + strings.TrimSuffix(str(m["vault_address"]), "/") + "/v1/" + strings.Trim(str(m["engine_path"]), "/") + "/keys/" + str(m["key_name"])
	}},
	{"hckms", func(m map[string]any) string { return "hckms " + str(m["key_id"]) }},
}

// str is v when it is a string, else its text (a number, a boolean).
func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

// safeText is s for an error: quoted when it holds anything but printable
// characters, cut when very long (a post-quantum recipient, about 2000
// characters, is kept whole).
func safeText(s string) string {
	const max = 4096
	if len(s) > max {
		s = s[:max] + "…"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.QuoteToASCII(s)
	}
	return s
}

// parseMetadata reads the metadata from its generic form (mappings as
// map[string]any, lists as []any, scalars; dotenv's strings included).
func parseMetadata(v any) (*metadata, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalidf("the sops metadata is not a mapping")
	}
	md := &metadata{}
	var err error
	if md.mac, ok = m["mac"].(string); !ok || md.mac == "" {
		return nil, invalidf("the sops metadata has no mac")
	}
	lm, ok := m["lastmodified"].(string)
	if !ok {
		return nil, invalidf("the sops metadata has no lastmodified string")
	}
	t, err := time.Parse(time.RFC3339, lm)
	if err != nil {
		return nil, invalidf("the sops metadata's lastmodified is not an RFC 3339 time")
	}
	md.lastModifiedAAD = t.Format(time.RFC3339)
	if md.macOnly, err = boolField(m, "mac_only_encrypted"); err != nil {
		return nil, err
	}
	if md.rules, err = parseRules(m); err != nil {
		return nil, err
	}
	if err := md.parseKeys(m); err != nil {
		return nil, err
	}
	return md, nil
}

// boolField reads a boolean that dotenv stores as a string.
func boolField(m map[string]any, field string) (bool, error) {
	switch v := m[field].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, invalidf("the sops metadata's %s is not a boolean", field)
		}
		return b, nil
	}
	return false, invalidf("the sops metadata's %s is not a boolean", field)
}

// parseRules reads the file's one encryption rule.
func parseRules(m map[string]any) (*rules, error) {
	r := &rules{}
	fields := []string{"unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex", "unencrypted_comment_regex", "encrypted_comment_regex"}
	var set []string
	for _, f := range fields {
		v, present := m[f]
		if !present || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return nil, invalidf("the sops metadata's %s is not a string", f)
		}
		if s == "" {
			continue
		}
		if len(s) > maxRuleLen {
			return nil, invalidf("the sops metadata's %s is longer than %d bytes", f, maxRuleLen)
		}
		set = append(set, f)
		var err error
		if strings.HasSuffix(f, "_regex") {
			if r.inst = progSize(s); r.inst > maxRuleInst {
				return nil, invalidf("the sops metadata's %s compiles to %d instructions, more than %d: testing it would cost too much", f, r.inst, maxRuleInst)
			}
		}
		switch f {
		case "unencrypted_suffix":
			r.unencSuffix = s
		case "encrypted_suffix":
			r.encSuffix = s
		case "unencrypted_regex":
			r.unencRe, err = regexp.Compile(s)
		case "encrypted_regex":
			r.encRe, err = regexp.Compile(s)
		case "unencrypted_comment_regex":
			r.unencCommentRe, err = regexp.Compile(s)
		case "encrypted_comment_regex":
			r.encCommentRe, err = regexp.Compile(s)
		}
		if err != nil {
			// sops would match nothing with it, silently.
			return nil, invalidf("the sops metadata's %s is not a valid regular expression", f)
		}
		r.name = f + " " + strconv.Quote(s)
	}
	switch len(set) {
	case 0:
		r.unencSuffix = "_unencrypted"
		r.name = `unencrypted_suffix "_unencrypted", the default`
	case 1:
	default:
		return nil, invalidf("the sops metadata has more than one rule (%s): sops allows one", strings.Join(set, ", "))
	}
	return r, nil
}

// parseKeys reads the key groups: the master key lists at the top of the
// metadata (one group), or key_groups and shamir_threshold.
func (md *metadata) parseKeys(m map[string]any) error {
	var top bool
	for _, kt := range keyTypes {
		if l, ok := m[kt.field].([]any); ok && len(l) > 0 {
			top = true
		}
	}
	groups, hasGroups := m["key_groups"].([]any)
	if m["key_groups"] != nil && !hasGroups {
		return invalidf("the sops metadata's key_groups is not a list")
	}
	hasGroups = hasGroups && len(groups) > 0
	total := 0
	switch {
	case top && hasGroups:
		return invalidf("the sops metadata has both key_groups and master keys outside them")
	case top:
		g, err := parseGroup(m, &total)
		if err != nil {
			return err
		}
		md.groups = [][]masterKey{g}
	case hasGroups:
		if len(groups) > maxGroups {
			return invalidf("the sops metadata has %d key groups, more than the %d allowed", len(groups), maxGroups)
		}
		for i, gv := range groups {
			gm, ok := gv.(map[string]any)
			if !ok {
				return invalidf("key group %d of the sops metadata is not a mapping", i)
			}
			g, err := parseGroup(gm, &total)
			if err != nil {
				return err
			}
			md.groups = append(md.groups, g)
		}
	default:
		return invalidf("the sops metadata lists no master key")
	}
	th, err := intField(m, "shamir_threshold")
	if err != nil {
		return err
	}
	if len(md.groups) > 1 {
		if th == 0 {
			th = len(md.groups) // what sops writes when none is set
		}
		if th < 2 || th > len(md.groups) {
			return invalidf("the sops metadata's shamir_threshold %d does not fit its %d key groups", th, len(md.groups))
		}
	}
	md.threshold = th
	return nil
}

// intField reads an integer that dotenv stores as a string.
func intField(m map[string]any, field string) (int, error) {
	switch v := m[field].(type) {
	case nil:
		return 0, nil
	case int:
		return v, nil
	case string:
		n, err := strconv.Atoi(v)
		if err == nil {
			return n, nil
		}
	}
	return 0, invalidf("the sops metadata's %s is not an integer", field)
}

// parseGroup reads one group's master keys; total counts them across
// groups.
func parseGroup(g map[string]any, total *int) ([]masterKey, error) {
	var keys []masterKey
	for _, kt := range keyTypes {
		v := g[kt.field]
		if v == nil {
			continue
		}
		l, ok := v.([]any)
		if !ok {
			return nil, invalidf("the sops metadata's %s is not a list", kt.field)
		}
		for _, e := range l {
			*total++
			if *total > maxMasterKeys {
				return nil, invalidf("the sops metadata lists more than %d master keys", maxMasterKeys)
			}
			em, ok := e.(map[string]any)
			if !ok {
				return nil, invalidf("an entry of the sops metadata's %s is not a mapping", kt.field)
			}
			enc, _ := em["enc"].(string)
			keys = append(keys, masterKey{typ: kt.field, name: safeText(kt.name(em)), enc: enc})
		}
	}
	if len(keys) == 0 {
		return nil, invalidf("a key group of the sops metadata is empty")
	}
	return keys, nil
}

// progSize is the number of instructions s compiles to (what testing it
// costs per byte), or 0 when it does not parse (Compile says so).
func progSize(s string) int {
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}
