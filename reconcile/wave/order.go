package wave

import (
	"slices"
	"strings"

	"recond.dev/recond/reconcile/diff"
)

// order ranks kinds so that what others depend on is written first:
// identities and permissions, then configuration and storage, then the
// services and workloads that use them, then the rest. Prunes run in
// reverse.
var order = map[string]int{
	"ServiceAccount": 0, "Role": 1, "RoleBinding": 2,
	"ConfigMap": 3, "Secret": 3, "PersistentVolumeClaim": 4, "Service": 5,
	"Deployment": 6, "StatefulSet": 6, "DaemonSet": 6, "ReplicaSet": 6, "Job": 6, "CronJob": 6, "Pod": 6,
}

// Rank is kind's place in the order; every kind not named comes last.
func Rank(kind string) int {
	if r, ok := order[kind]; ok {
		return r
	}
	return 7
}

// ByDependency orders changes by rank, then kind, then name.
func ByDependency(a, b diff.Change) int {
	if d := Rank(a.Kind) - Rank(b.Kind); d != 0 {
		return d
	}
	if d := strings.Compare(a.Kind, b.Kind); d != 0 {
		return d
	}
	return strings.Compare(a.Name, b.Name)
}

// Order splits changes into the writes (creates and updates), sorted by
// dependency, and the deletes, in reverse.
func Order(changes []diff.Change) (writes, deletes []diff.Change) {
	for _, c := range changes {
		if c.Action == diff.Delete {
			deletes = append(deletes, c)
		} else {
			writes = append(writes, c)
		}
	}
	slices.SortStableFunc(writes, ByDependency)
	slices.SortStableFunc(deletes, func(a, b diff.Change) int { return ByDependency(b, a) })
	return writes, deletes
}

// Split splits changes sorted by dependency into runs of the same rank:
// the objects of a wave do not depend on each other and are written
// concurrently; a wave starts when the one before it has been written.
func Split(cs []diff.Change) [][]diff.Change {
	var out [][]diff.Change
	for i := 0; i < len(cs); {
		j := i + 1
		for j < len(cs) && Rank(cs[j].Kind) == Rank(cs[i].Kind) {
			j++
		}
		out = append(out, cs[i:j:j])
		i = j
	}
	return out
}
