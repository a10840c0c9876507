// Package leader makes sure that at most one process writes for a recond
// instance: the processes of an instance campaign for one
// coordination.k8s.io Lease in their namespace (client-go's leader
// election); the holder runs the loop, the others wait as standby and take
// over when the holder stops renewing.
//
// Holding the Lease is not enough to write: an Elector's MayWrite says
// whether this process holds the Lease as last observed, and the apply
// phase asks it before every write. The Elector watches its Lease, so a
// Lease deleted or taken by another process stops the writes at once (not
// only once the renewals have failed for the renew deadline); a process
// that takes a Lease it did not see expire (one deleted and created again)
// waits a lease duration before its first write, so that the old holder
// has stopped first.
//
// The loop is stopped before the Lease is released, so a standby never
// starts writing while the old leader is still finishing an object.
//
// ModeClaim holds the Lease for one pod per instance at about no cost: the
// process takes it at start from whoever holds it, and renews it only every
// third of Config.ClaimDuration (ten minutes by default). That renewal is
// the claimant's sign of life: one that dies without releasing the Lease
// holds it for ClaimDuration after its last renewal at most, then a process
// that campaigns with renewals takes it over, and State.Overdue tells such a
// process, meanwhile, that the holder has most likely stopped.
package leader
