// Command gen writes ottlpath.Rules to the file named by its argument (the dashboard's
// src/generated/ottlpaths.json).
package main

import (
	"fmt"
	"os"

	"github.com/otelcol-svc/otelcol-svc/internal/ottlpath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen OUT.json")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], ottlpath.Rules(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
