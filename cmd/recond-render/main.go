// Command recond-render is recond's render binary: recond starts it for
// every render of a revision (a chart, a kustomization, plain files, SOPS
// decryption), one process per render, confined and killed at the
// render's deadline, and talks to it over a pipe (package worker). It
// links what recond itself does not: kustomize, Helm, SOPS and age. Run by
// hand, it prints its version.
package main

import (
	"fmt"
	"os"

	"recond.dev/recond/reconcile/source/renderer"
)

// version is set at build time with -ldflags "-X main.version=...": it
// must be recond's own, which recond checks when it starts.
var version = "dev"

func main() {
	renderer.RunIfAsked(version)
	if len(os.Args) == 2 && (os.Args[1] == "version" || os.Args[1] == "--version") {
		fmt.Printf("recond-render %s\n", version)
		return
	}
	fmt.Fprintf(os.Stderr, "recond-render %s is recond's render binary: recond starts it (--render-binary); it takes no command but version\n", version)
	os.Exit(2)
}
