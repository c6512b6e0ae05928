package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-edge/cairn/agent"
	"github.com/cairn-edge/cairn/agent/api"
)

// followEvery is how often --follow asks the agent for new dead letters.
const followEvery = time.Second

// cmdDeadLetters lists the stored dead letters: from the running agent, or
// from the data directory of a stopped one. --follow then prints those
// stored later, until the agent stops or the command is interrupted.
func cmdDeadLetters(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var asJSON, follow bool
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print one JSON object a line")
		fs.BoolVar(&follow, "follow", false, "then print those stored later, while the agent runs")
	})
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	print := deadLetterPrinter(stdout, asJSON)
	c := client(dataDir)
	stopped := false // no agent: read the data directory
	read := func(from uint64) (api.DeadLetters, error) {
		if !stopped {
			page, err := c.DeadLetters(ctx, from, 0)
			if !errors.Is(err, api.ErrNoAgent) || from > 0 {
				return page, err
			}
			stopped = true
		}
		return agent.DeadLetters(dataDir, from, 0)
	}
	var from uint64
	for first := true; ; first = false {
		page, err := read(from)
		switch {
		case ctx.Err() != nil:
			return 0
		case errors.Is(err, api.ErrNoAgent):
			fmt.Fprintln(stderr, "cairn deadletters: the agent stopped")
			return 0
		case err != nil:
			return exitCode(err, stderr)
		}
		print(page.DeadLetters)
		if first && len(page.DeadLetters) == 0 && !asJSON {
			none := "no dead letters"
			if follow && !stopped {
				none += " yet: waiting for new ones (Ctrl-C stops)"
			}
			fmt.Fprintln(stdout, none)
		}
		from = max(from, page.Next)
		switch {
		case len(page.DeadLetters) > 0:
			continue // there may be more at once
		case !follow:
			return 0
		case stopped:
			fmt.Fprintln(stderr, "cairn deadletters: no agent is running: nothing more will come")
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(followEvery):
		}
	}
}

// deadLetterPrinter prints dead letters as a table, its header once
// before the first, or as JSON lines.
func deadLetterPrinter(out io.Writer, asJSON bool) func([]api.DeadLetter) {
	if asJSON {
		enc := json.NewEncoder(out)
		return func(dls []api.DeadLetter) {
			for _, dl := range dls {
				enc.Encode(dl)
			}
		}
	}
	header := true
	return func(dls []api.DeadLetter) {
		if len(dls) == 0 {
			return
		}
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		if header {
			fmt.Fprintln(w, "TIME\tFROM\tREASON\tPAYLOAD")
			header = false
		}
		for _, dl := range dls {
			at := "-"
			if !dl.Time.IsZero() {
				at = dl.Time.Local().Format(time.DateTime)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", at, origin(dl), cut(dl.Reason, 80), payloadText(dl))
		}
		w.Flush()
	}
}

// origin says where a dead letter came from: the operator that rejected
// it, if one did, and the source and topic that received it and its
// ingest log offset, where known.
func origin(dl api.DeadLetter) string {
	from := fmt.Sprintf("%s %s @%d", dl.Source, dl.Topic, dl.Offset)
	switch {
	case dl.Operator == "":
		return from
	case dl.Source == "":
		return "operator " + dl.Operator
	}
	return "operator " + dl.Operator + " from " + from
}

// payloadText is a dead letter's payload cut to 60 characters, quoted if
// it is not all printable text.
func payloadText(dl api.DeadLetter) string {
	p := cut(dl.Payload, 60)
	if !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsGraphic(r) }) {
		p = strconv.QuoteToGraphic(p)
	}
	if n := len([]rune(dl.Payload)); n > 60 || dl.PayloadBytes > len(dl.Payload) {
		p += fmt.Sprintf(" (%d bytes)", dl.PayloadBytes)
	}
	return p
}

// cut returns s cut to n characters, "…" marking a cut, on one line.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
