// Package heal holds self-heal's bookkeeping between ticks: when a watch
// showed another manager change an object, which write of recond restored
// it (a heal, and its latency), and the back-off of an object two managers
// fight over. A Book is plain data: it does no I/O and takes no lock; the
// engine keeps one in its memory, behind the memory's mutex.
package heal
