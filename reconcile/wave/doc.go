// Package wave holds the order in which the apply phase writes: kinds that
// others depend on first (identities and permissions, then configuration
// and storage, then the services and workloads that use them, then the
// rest), prunes in reverse, and the waves that order makes: runs of
// changes of one rank, which do not depend on each other and are written
// at once. Pure: no I/O.
package wave
