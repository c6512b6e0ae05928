// Command cairn is the edge stream agent: it runs MQTT-fed operator graphs
// with Flink-style checkpoints on a gateway device.
//
// Usage:
//
//	cairn version
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; it
// falls back to the module version or VCS revision in the build info.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `cairn — an edge stream agent with exactly-once checkpoints

Usage:
  cairn version    print the version and exit
  cairn help       print this help

`

// run executes the command line args and returns the exit status: 0 on
// success, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "cairn %s\n", buildVersion())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "cairn: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return "devel-" + s.Value[:min(12, len(s.Value))]
		}
	}
	return "devel"
}
