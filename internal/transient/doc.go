// Package transient tells failures of the network and of the machine (a
// refused or reset connection, a timeout, a full disk, no file descriptor
// left) from other errors: the ones that pass without a change to Git or
// the cluster. The Git source and the loop's classifier both ask it, so the
// list is kept once.
package transient
