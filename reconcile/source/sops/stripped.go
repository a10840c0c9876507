package sops

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// encValue matches a value of the form sops writes for an encrypted
// value, whole or cut short, wherever it stands (a YAML scalar, quoted or
// not; a JSON string; a dotenv line).
var encValueRe = regexp.MustCompile(`ENC\[AES256_GCM,data:[^\]\s"']*\]`)

// MayHold is a cheap look for anything sops writes: its metadata's name
// with its mac, lastmodified or a wrapped data key (YAML, JSON, binary:
// "sops" and "mac"; dotenv: "sops_mac"), or the start of an encrypted
// value. A file for which it is false is neither [Encrypted] nor
// [Stripped].
func MayHold(data []byte) bool {
	return bytes.Contains(data, []byte(encPrefix)) ||
		bytes.Contains(data, []byte(sopsKey)) && (bytes.Contains(data, []byte("mac")) ||
			bytes.Contains(data, []byte("lastmodified")) || bytes.Contains(data, []byte("enc")))
}

// Stripped returns an *[Error] with reason invalid when data, a file in
// format f that is not [Encrypted], still holds part of what sops writes:
//
//   - a sops metadata block (a top-level "sops" mapping; dotenv: sops_
//     lines) that lacks its mac or its lastmodified, which every file sops
//     writes has (a block is told from a value of that name by its mac,
//     its lastmodified or a master key's wrapped data key);
//   - a value of the form ENC[AES256_GCM,…] in a file with no metadata
//     (its sops block removed).
//
// Such a file can be neither decrypted nor verified, and read as plain
// it would give its ciphertext as values. It returns nil for an
// Encrypted file (Decrypt checks its metadata whole) and for one that
// holds neither. Like Encrypted, it is cheap and reads data only; its
// error names what is missing, never a value.
func Stripped(f Format, data []byte) error {
	if !MayHold(data) || Encrypted(f, data) {
		return nil
	}
	if missing := strippedBlock(f, data); missing != "" {
		return invalidf("the sops metadata has no %s, which sops writes in every file it encrypts: the file was "+
			"changed after sops wrote it; encrypt it again with sops", missing)
	}
	if encValueRe.Match(data) {
		return invalidf("it holds SOPS-encrypted values (ENC[AES256_GCM,…]) but no sops metadata: its sops block was " +
			"removed, so it can be neither decrypted nor verified; encrypt it again with sops")
	}
	return nil
}

// strippedBlock is what a sops metadata block of data lacks of "mac" and
// "lastmodified", or "" when data has no such block or it lacks neither.
func strippedBlock(f Format, data []byte) string {
	var blocks []metadataFields
	switch f {
	case YAML:
		docs, err := yamlDocuments(data)
		if err != nil {
			return ""
		}
		for _, d := range docs {
			if len(d.Content) != 1 || d.Content[0].Kind != yaml.MappingNode {
				continue
			}
			m := d.Content[0]
			for i := 0; i+1 < len(m.Content); i += 2 {
				if k, v := m.Content[i], m.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == sopsKey && v.Kind == yaml.MappingNode {
					blocks = append(blocks, yamlFields(v))
				}
			}
		}
	case JSON, Binary:
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			return ""
		}
		var md map[string]json.RawMessage
		if json.Unmarshal(top[sopsKey], &md) != nil || md == nil {
			return ""
		}
		blocks = append(blocks, jsonFields(md))
	case Dotenv:
		var fl metadataFields
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			k, _, ok := strings.Cut(string(line), "=")
			name, isMeta := strings.CutPrefix(k, sopsPrefix)
			if !ok || !isMeta {
				continue
			}
			fl.mac = fl.mac || name == "mac"
			fl.lastModified = fl.lastModified || name == "lastmodified"
			fl.wrapped = fl.wrapped || strings.HasSuffix(name, flatMap+"enc")
		}
		blocks = append(blocks, fl)
	}
	for _, b := range blocks {
		if !b.mac && !b.lastModified && !b.wrapped {
			continue // a value named sops, not sops's metadata
		}
		switch {
		case !b.mac && !b.lastModified:
			return "mac and no lastmodified"
		case !b.mac:
			return "mac"
		case !b.lastModified:
			return "lastmodified"
		}
	}
	return ""
}

// metadataFields is what tells a sops metadata block: its mac, its
// lastmodified, a master key entry's wrapped data key ("enc").
type metadataFields struct{ mac, lastModified, wrapped bool }

func yamlFields(m *yaml.Node) metadataFields {
	var fl metadataFields
	for j := 0; j+1 < len(m.Content); j += 2 {
		k, v := m.Content[j], m.Content[j+1]
		switch k.Value {
		case "mac":
			fl.mac = true
		case "lastmodified":
			fl.lastModified = true
		case "key_groups":
			// Each group is a mapping of master key lists.
			if v.Kind == yaml.SequenceNode {
				for _, g := range v.Content {
					if g.Kind == yaml.MappingNode && yamlFields(g).wrapped {
						fl.wrapped = true
					}
				}
			}
		default:
			if v.Kind != yaml.SequenceNode {
				continue
			}
			for _, e := range v.Content {
				if e.Kind != yaml.MappingNode {
					continue
				}
				for i := 0; i+1 < len(e.Content); i += 2 {
					fl.wrapped = fl.wrapped || e.Content[i].Value == "enc"
				}
			}
		}
	}
	return fl
}

func jsonFields(md map[string]json.RawMessage) metadataFields {
	fl := metadataFields{}
	_, fl.mac = md["mac"]
	_, fl.lastModified = md["lastmodified"]
	for k, raw := range md {
		if k == "key_groups" {
			var groups []map[string]json.RawMessage
			if json.Unmarshal(raw, &groups) == nil {
				for _, g := range groups {
					fl.wrapped = fl.wrapped || jsonFields(g).wrapped
				}
			}
			continue
		}
		var entries []map[string]json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			continue
		}
		for _, e := range entries {
			_, enc := e["enc"]
			fl.wrapped = fl.wrapped || enc
		}
	}
	return fl
}
