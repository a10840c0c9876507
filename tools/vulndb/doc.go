// Command vulndb writes an offline Go vulnerability database, in the v1 layout
// that `govulncheck -db file:///DIR` reads, from the OSV entries that the
// golang.org/x/vulndb module carries in data/osv.
//
//	go run . -out $HOME/.cache/recond/vulndb-<version>
//
// The module pins golang.org/x/vulndb in go.mod, so the database is a fixed
// snapshot of that commit: the scan that reads it needs no network, and the
// snapshot only changes when go.mod does. The output directory holds
//
//	index/db.json       {"modified": T}, T the latest modified time of any entry
//	index/modules.json  per module: each entry's id, modified time and latest fix
//	index/vulns.json    per entry: id, modified time and aliases
//	ID/<id>.json        the OSV entry itself
//
// The OSV files in the module carry no modified time (the real database takes
// it from Git history, which a module zip does not have), so an entry without
// one is stamped with the commit time of the pinned pseudo-version: no entry
// in the snapshot can have changed after it, and db.json then tells how old
// the snapshot is. A later run that finds index/db.json in place returns at
// once; the directory is written under a temporary name and renamed, so an
// interrupted run leaves nothing that looks complete.
//
// The module also lists x/vulndb's own generator as a tool (`go tool indexdb
// -vulns DIR -out DIR`): its indexes match the ones written here except for
// the modified times, which it leaves at zero.
package main
