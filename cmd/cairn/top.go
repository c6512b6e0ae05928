package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/cairn-edge/cairn/tui"
)

// cmdTop runs the terminal UI against the agent on the data directory; it
// waits for an agent that is not running yet.
func cmdTop(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var opts tui.Options
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.DurationVar(&opts.Stall, "stall", time.Second, "highlight barrier alignments longer than this")
	})
	if !ok {
		return code
	}
	if err := tui.Run(client(dataDir), opts); err != nil {
		fmt.Fprintln(stderr, "cairn top:", err)
		return 1
	}
	return 0
}
