//go:build race

package source

// raceEnabled: the race detector maps its shadow memory where an
// address-space limit leaves no room, so memory limits are not tested.
const raceEnabled = true
