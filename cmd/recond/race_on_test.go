//go:build race

package main

// raceEnabled: the race detector maps its shadow memory where an
// address-space cap leaves no room, so runs under one are not tested.
const raceEnabled = true
