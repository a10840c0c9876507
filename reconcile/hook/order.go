package hook

import (
	"cmp"
	"slices"

	"recond.dev/recond/reconcile/wave"
)

// Of returns the hooks that run for event ("pre-upgrade"), in the order
// they run: by weight, then in the order kinds are written
// (reconcile/wave), then by Key.
func Of(hooks []*Hook, event string) []*Hook {
	var list []*Hook
	for _, h := range hooks {
		if slices.Contains(h.Events, event) {
			list = append(list, h)
		}
	}
	slices.SortStableFunc(list, func(a, b *Hook) int {
		return cmp.Or(cmp.Compare(a.Weight, b.Weight), cmp.Compare(wave.Rank(a.Object.GetKind()), wave.Rank(b.Object.GetKind())), cmp.Compare(a.Key(), b.Key()))
	})
	return list
}

// Weights splits hooks, in the order Of returns, into the groups of one
// weight: a weight's hooks start once the lower weights succeeded.
func Weights(hooks []*Hook) [][]*Hook {
	var out [][]*Hook
	for i := 0; i < len(hooks); {
		j := i
		for j < len(hooks) && hooks[j].Weight == hooks[i].Weight {
			j++
		}
		out = append(out, hooks[i:j])
		i = j
	}
	return out
}
