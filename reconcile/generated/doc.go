// Package generated holds the diff's rule for the fields a chart's key or
// certificate maker (or a random salt) made: written when the object is
// created, the live values kept after that, unless the ordinary inputs
// the field is made from changed (source.GeneratedInputsChanged); an
// object made whole that way is never updated. Pure: no I/O.
package generated
