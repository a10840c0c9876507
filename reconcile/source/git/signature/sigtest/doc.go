// Package sigtest serves tests the signed commits and tags of package
// signature's testdata (made by the real git, gpg and ssh-keygen:
// testdata/generate.sh), the keys they are checked against, and Cases,
// what verifying each must give. Package signature's tests run every case
// on the objects; package source's store the objects in a real repository
// and fetch them with verification on, so that both read one set of
// fixtures and one table.
package sigtest
