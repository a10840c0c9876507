package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// kind is what an event asks of recond.
type kind int

const (
	kindOther kind = iota // an event recond does not act on
	kindPing              // a provider's connectivity test
	kindPush              // refs moved (or were created or deleted)
)

// event is the part of a delivery that recond reads.
type event struct {
	kind kind
	refs []string // full ref names ("refs/heads/main"), each once
}

var errNoRef = errors.New("push names no ref")

// parse reads the event named by the provider's event header from a JSON
// payload. It never panics, whatever the input; an error means the payload is
// not JSON or is a push that names no ref.
func parse(provider, name string, payload []byte) (event, error) {
	switch provider {
	case GitHub:
		switch name {
		case "ping":
			return valid(kindPing, payload)
		case "push":
			return topLevelRef(payload)
		}
	case Gitea:
		switch name {
		case "push":
			return topLevelRef(payload)
		case "delete":
			// Gitea and Forgejo send a delete event, with the short name,
			// when a branch or tag is deleted.
			return giteaDelete(payload)
		}
	case GitLab:
		switch name {
		case "Push Hook", "Tag Push Hook":
			return topLevelRef(payload)
		case "System Hook":
			return gitlabSystem(payload)
		}
	case Bitbucket:
		switch name {
		case "diagnostics:ping":
			return valid(kindPing, payload)
		case "repo:push":
			return bitbucketCloudPush(payload)
		case "repo:refs_changed":
			return bitbucketServerPush(payload)
		}
	}
	return valid(kindOther, payload)
}

func valid(k kind, payload []byte) (event, error) {
	if !json.Valid(payload) {
		return event{}, errors.New("payload is not JSON")
	}
	return event{kind: k}, nil
}

func decode(payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("decode payload: %w", err)
	}
	return nil
}

// topLevelRef reads GitHub's, Gitea's and GitLab's push payload: a top-level
// "ref" holding the full ref name. A push that deletes the ref (GitHub's
// "deleted": true, "after" all zeros) names it the same way.
func topLevelRef(payload []byte) (event, error) {
	var p struct {
		Ref string `json:"ref"`
	}
	if err := decode(payload, &p); err != nil {
		return event{}, err
	}
	if p.Ref == "" {
		return event{}, errNoRef
	}
	return event{kind: kindPush, refs: []string{p.Ref}}, nil
}

func giteaDelete(payload []byte) (event, error) {
	var p struct {
		Ref     string `json:"ref"`
		RefType string `json:"ref_type"`
	}
	if err := decode(payload, &p); err != nil {
		return event{}, err
	}
	ref := fullRef(p.RefType, p.Ref)
	if ref == "" {
		return event{kind: kindPush}, nil
	}
	return event{kind: kindPush, refs: []string{ref}}, nil
}

func gitlabSystem(payload []byte) (event, error) {
	var p struct {
		ObjectKind string `json:"object_kind"`
		EventName  string `json:"event_name"`
	}
	if err := decode(payload, &p); err != nil {
		return event{}, err
	}
	k := p.ObjectKind
	if k == "" {
		k = p.EventName
	}
	if k == "push" || k == "tag_push" {
		return topLevelRef(payload)
	}
	return event{kind: kindOther}, nil
}

// bitbucketCloudPush reads push.changes[]: each change has a "new" state
// (null when the ref was deleted) and an "old" one (null when created).
func bitbucketCloudPush(payload []byte) (event, error) {
	type state struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	var p struct {
		Push struct {
			Changes []struct {
				New *state `json:"new"`
				Old *state `json:"old"`
			} `json:"changes"`
		} `json:"push"`
	}
	if err := decode(payload, &p); err != nil {
		return event{}, err
	}
	var refs refSet
	for _, c := range p.Push.Changes {
		s := c.New
		if s == nil {
			s = c.Old
		}
		if s != nil {
			refs.add(fullRef(s.Type, s.Name))
		}
	}
	return event{kind: kindPush, refs: refs.refs}, nil
}

// bitbucketServerPush reads Bitbucket Server's changes[].refId (or
// changes[].ref.id), which hold full ref names.
func bitbucketServerPush(payload []byte) (event, error) {
	var p struct {
		Changes []struct {
			RefID string `json:"refId"`
			Ref   struct {
				ID string `json:"id"`
			} `json:"ref"`
		} `json:"changes"`
	}
	if err := decode(payload, &p); err != nil {
		return event{}, err
	}
	var refs refSet
	for _, c := range p.Changes {
		ref := c.RefID
		if ref == "" {
			ref = c.Ref.ID
		}
		refs.add(ref)
	}
	return event{kind: kindPush, refs: refs.refs}, nil
}

// refSet collects ref names, each once, in the order first seen. Adding is
// constant time, so a push that names n refs (Bitbucket Server sends one
// change per ref: 30,000 for a mirror's first push) costs O(n), not O(n²).
type refSet struct {
	refs []string
	seen map[string]struct{}
}

// add adds ref unless it is empty or already there.
func (s *refSet) add(ref string) {
	if ref == "" {
		return
	}
	if _, dup := s.seen[ref]; dup {
		return
	}
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	s.seen[ref] = struct{}{}
	s.refs = append(s.refs, ref)
}

// fullRef turns a short name and its type into a full ref name; "" when the
// type is neither a branch nor a tag.
func fullRef(typ, name string) string {
	if name == "" {
		return ""
	}
	if strings.HasPrefix(name, "refs/") {
		return name
	}
	switch strings.ToLower(typ) {
	case "branch":
		return "refs/heads/" + name
	case "tag":
		return "refs/tags/" + name
	}
	return ""
}
