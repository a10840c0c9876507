package diff

import "strings"

// listKey says how the items of a list of maps are matched: by the values of
// fields, some of which may be left out and take a default (protocol: TCP).
type listKey struct {
	fields   []string
	defaults map[string]any
}

var (
	nameKey     = &listKey{fields: []string{"name"}}
	tcpDefault  = map[string]any{"protocol": "TCP"}
	keysByField = map[string][]*listKey{
		"ports": {
			{fields: []string{"containerPort", "protocol"}, defaults: tcpDefault},
			{fields: []string{"port", "protocol"}, defaults: tcpDefault},
		},
		"volumeMounts":  {{fields: []string{"mountPath"}}},
		"volumeDevices": {{fields: []string{"devicePath"}}},
		"hostAliases":   {{fields: []string{"ip"}}},
	}
)

// keyDefaults are the defaults of list-map key fields that a manifest may
// leave out while managedFields keys carry them.
var keyDefaults = tcpDefault

// keyFor picks how to match the desired items d of the list under field with
// the live items: by name, else by a well-known merge key of that field, when
// every desired item has the key and the keys are unique; nil means match by
// index. An empty desired list is keyed by name when every live item has a
// name, so that it claims nothing in a list others add to.
func keyFor(field string, d, live []any) *listKey {
	if len(d) == 0 {
		if nameKey.fits(live) {
			return nameKey
		}
		return nil
	}
	if nameKey.fits(d) {
		return nameKey
	}
	for _, k := range keysByField[field] {
		if k.fits(d) {
			return k
		}
	}
	return nil
}

// fits reports whether every item is a map carrying the key, with no key
// repeated.
func (k *listKey) fits(items []any) bool {
	if len(items) == 0 {
		return false
	}
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		for _, f := range k.fields {
			if _, optional := k.defaults[f]; !optional && m[f] == nil {
				return false
			}
		}
		s := k.selector(m)
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

func (k *listKey) get(m map[string]any, f string) any {
	if v := m[f]; v != nil {
		return v
	}
	return k.defaults[f]
}

// selector renders the key of item as a path element body, "name=web".
func (k *listKey) selector(item any) string {
	m, _ := item.(map[string]any)
	parts := make([]string, len(k.fields))
	for i, f := range k.fields {
		parts[i] = f + "=" + formatScalar(k.get(m, f))
	}
	return strings.Join(parts, ",")
}

// find returns the first item of items whose key equals item's, or nil.
func (k *listKey) find(items []any, item any) map[string]any {
	m, _ := item.(map[string]any)
	for _, it := range items {
		lm, ok := it.(map[string]any)
		if !ok {
			continue
		}
		match := true
		for _, f := range k.fields {
			if !scalarEqual(FieldPlain, k.get(m, f), k.get(lm, f)) {
				match = false
				break
			}
		}
		if match {
			return lm
		}
	}
	return nil
}

func allMaps(items []any) bool {
	for _, it := range items {
		if _, ok := it.(map[string]any); !ok {
			return false
		}
	}
	return true
}
