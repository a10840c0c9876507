// Command checkstatic fails unless every binary named on the command line is
// statically linked and built with CGO_ENABLED=0 (make image, without Docker).
//
//	go run ./deploy/checkstatic bin/image/recond
package main

import (
	"fmt"
	"os"

	"recond.dev/recond/deploy"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: checkstatic BINARY...")
		os.Exit(2)
	}
	code := 0
	for _, path := range os.Args[1:] {
		settings, err := deploy.CheckStatic(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "checkstatic:", err)
			code = 1
			continue
		}
		if settings == nil {
			fmt.Printf("%s: static (no interpreter, no dynamic section)\n", path)
			continue
		}
		fmt.Printf("%s: static (no interpreter, no dynamic section), %s, CGO_ENABLED=%s, -trimpath=%s\n",
			path, settings["go"], settings["CGO_ENABLED"], settings["-trimpath"])
	}
	os.Exit(code)
}
