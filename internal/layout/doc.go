// Package layout holds no code: its test asserts the project's import
// floors. Every package of the module has a floor in floors_test.go, and a
// package imports only packages of lower floors, so that the vocabulary
// stays at the bottom (reasons, keys, masks, trees), the rules in leaves,
// the engine above them and the command on top. A new package must be
// given its floor there, and an import that points up or sideways fails the
// test: the layout cannot drift back into one room.
package layout
