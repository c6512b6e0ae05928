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
func cmdTop(args []string, stderr io.Writer) int {
	var opts tui.Options
	dataDir, code := dataDirOf("top", "top [--stall DURATION] (-c FILE | --data-dir DIR)", args, stderr, func(fs *flag.FlagSet) {
		fs.DurationVar(&opts.Stall, "stall", time.Second, "highlight barrier alignments longer than this")
	})
	if code != 0 {
		return code
	}
	if err := tui.Run(client(dataDir), opts); err != nil {
		fmt.Fprintln(stderr, "cairn top:", err)
		return 1
	}
	return 0
}
