// Command findings reads govulncheck's JSON output (-format json) on stdin
// and sorts the vulnerabilities that the scanned code reaches (a finding
// whose trace ends in a function) into those of modules and those of the
// standard library, which come with the Go toolchain that builds recond
// rather than with go.mod.
//
// It prints one line per reachable vulnerability and exits 3 when a module
// has one, or when the standard library has one and -stdlib=fail; 0
// otherwise; 1 when the input is not govulncheck's.
//
//	govulncheck -format json ./... | findings [-stdlib=fail|warn]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// message is one JSON value of govulncheck's output stream.
type message struct {
	Config *struct {
		ScannerVersion string `json:"scanner_version"`
		GoVersion      string `json:"go_version"`
	} `json:"config"`
	Finding *finding `json:"finding"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
}

// reachable is one vulnerability the code calls into.
type reachable struct {
	id, module, version, fixed, symbol string
}

func main() {
	stdlib := flag.String("stdlib", "fail", "fail or warn: what a reachable vulnerability of the standard library does")
	flag.Parse()
	if *stdlib != "fail" && *stdlib != "warn" {
		fmt.Fprintln(os.Stderr, "findings: -stdlib must be fail or warn")
		os.Exit(1)
	}
	code, err := run(os.Stdin, os.Stdout, *stdlib == "fail")
	if err != nil {
		fmt.Fprintln(os.Stderr, "findings:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(in io.Reader, out io.Writer, failStdlib bool) (int, error) {
	dec := json.NewDecoder(in)
	seen := map[string]reachable{}
	configured := false
	goVersion := ""
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read govulncheck's JSON: %w", err)
		}
		if m.Config != nil {
			configured, goVersion = true, m.Config.GoVersion
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue // imported or required, not called
		}
		t := f.Trace[0]
		sym := t.Package + "." + t.Function
		if t.Receiver != "" {
			sym = t.Package + "." + t.Receiver + "." + t.Function
		}
		key := f.OSV + " " + t.Module
		if _, ok := seen[key]; !ok {
			seen[key] = reachable{id: f.OSV, module: t.Module, version: t.Version, fixed: f.FixedVersion, symbol: sym}
		}
	}
	if !configured {
		return 0, errors.New("no config message: not govulncheck -format json output")
	}
	list := make([]reachable, 0, len(seen))
	for _, r := range seen {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].module != list[j].module {
			return list[i].module < list[j].module
		}
		return list[i].id < list[j].id
	})
	var modules, std int
	for _, r := range list {
		kind := "module"
		if r.module == "stdlib" {
			kind = "standard library (" + goVersion + ")"
			std++
		} else {
			modules++
		}
		fmt.Fprintf(out, "reachable: %s in %s %s@%s, fixed in %s, via %s\n", r.id, kind, r.module, r.version, r.fixed, r.symbol)
	}
	fmt.Fprintf(out, "reachable vulnerabilities: %d in modules, %d in the standard library of %s\n", modules, std, goVersion)
	switch {
	case modules > 0:
		return 3, nil
	case std > 0 && failStdlib:
		return 3, nil
	case std > 0:
		fmt.Fprintf(out, "the standard library's are the toolchain's (%s): build releases with the Go release that fixes them\n", goVersion)
	}
	return 0, nil
}
