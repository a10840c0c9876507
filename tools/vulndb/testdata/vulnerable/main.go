// Command vulnerable parses a language tag with a version of golang.org/x/text
// that has a known out-of-bounds read, so that a scan of it must report one.
package main

import (
	"fmt"
	"os"

	"golang.org/x/text/language"
)

func main() {
	tag, err := language.Parse(os.Args[1])
	fmt.Println(tag, err)
}
