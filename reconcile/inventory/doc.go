// Package inventory holds the schema of an instance's inventory: the
// ConfigMap recond-inventory-<instance> in which it records, across
// restarts, every kind it has applied (so that a kind that left Git is
// still listed and its objects pruned), the last revision it applied in
// full (so that --self-heal=false can tell drift from a new revision) and
// the state of that revision's hooks. It reads and writes the ConfigMap's
// data, builds the object recond applies, and compares a live ConfigMap
// with the copy recond keeps in memory, in the way of cli-utils'
// pkg/inventory/inventorycm.go. It is pure: the engine (package reconcile)
// GETs, lists, applies and patches the ConfigMap.
package inventory
