// Package leader makes sure that at most one process writes for a recond
// instance: the processes of an instance campaign for one
// coordination.k8s.io Lease in their namespace (client-go's leader
// election); the holder runs the loop, the others wait as standby and take
// over when the holder stops renewing.
//
// The loop is stopped before the Lease is released, so a standby never
// starts writing while the old leader is still finishing an object.
package leader
