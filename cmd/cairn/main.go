// Command cairn is the edge stream agent: it runs MQTT-fed operator graphs
// with Flink-style checkpoints on a gateway device.
//
// Usage:
//
//	cairn run -c FILE [--data-dir DIR] [--log-level LEVEL] [--control-group GROUP] [--from-savepoint FILE [--allow-dropped-state]] [--accept-state-loss]
//	cairn validate -c FILE
//	cairn status [--json] (-c FILE | --data-dir DIR)
//	cairn checkpoint (-c FILE | --data-dir DIR)
//	cairn savepoint [--name NAME] [--force] (-c FILE | --data-dir DIR)
//	cairn stop [--savepoint [NAME] [--force]] (-c FILE | --data-dir DIR)
//	cairn checkpoints [--verify] (-c FILE | --data-dir DIR)
//	cairn deadletters [--json] [--follow] (-c FILE | --data-dir DIR)
//	cairn top [--stall DURATION] (-c FILE | --data-dir DIR) | --fleet (-c FILE | --broker URL --topic FILTER)
//	cairn completion bash|zsh|fish
//	cairn version
//
// cairn COMMAND -h prints a command's flags. The benchmarks are a program
// of their own, cairn-bench (cmd/cairn-bench).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cairn-edge/cairn/agent"
	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
)

// A release build (.ci/release) stamps these with -ldflags "-X
// main.version=1.2.3 -X main.commit=HASH -X main.date=TIME": the
// version, the commit's full hash (with -dirty when built from a modified
// tree) and the build time (RFC 3339, UTC). Without them `cairn version`
// says what the build information holds (versionLine).
var version, commit, date string

// versionFile is the version of this tree, 0.4.0-dev between releases and
// 0.4.0 at the commit tagged v0.4.0: the one place it is written.
// .ci/release reads the same file, and TestVersionsAgree holds the
// README to it.
//
//go:embed VERSION
var versionFile string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one of cairn's subcommands. The usage text, the dispatch and
// the shell completions are all made from commands(), so they cannot
// disagree.
type command struct {
	name     string
	args     string   // its arguments, as the usage shows them
	summary  string   // what it does, in a line
	operands []string // the words it takes besides flags, for completion
	// main runs the command. It declares its flags on fs (named "cairn
	// NAME", its output the command's stderr, its Usage the command's)
	// and parses them with parseFlags before it does anything else:
	// given -h it prints its usage and returns 0 having done nothing,
	// which is how completion learns its flags. Nil for version and
	// help, which run answers itself.
	main func(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int
}

// commands are cairn's subcommands, in the order the usage lists them.
func commands() []command {
	const agent = "(-c FILE | --data-dir DIR)"
	return []command{
		{name: "run", args: "-c FILE [--data-dir DIR] [--log-level LEVEL] [--control-group GROUP] [--from-savepoint FILE [--allow-dropped-state]] [--accept-state-loss]",
			summary: "run a pipeline in the foreground", main: cmdRun},
		{name: "validate", args: "-c FILE", summary: "check a pipeline file", main: cmdValidate},
		{name: "status", args: "[--json] " + agent, summary: "a running agent's state", main: cmdStatus},
		{name: "checkpoint", args: agent, summary: "take a checkpoint now, print its id", main: cmdCheckpoint},
		{name: "savepoint", args: "[--name NAME] [--force] " + agent, summary: "write a savepoint file, print its path", main: cmdSavepoint},
		{name: "stop", args: "[--savepoint [NAME] [--force]] " + agent, summary: "stop the agent, with a final checkpoint or a savepoint", main: cmdStop},
		{name: "checkpoints", args: "[--verify] " + agent, summary: "list the retained checkpoints", main: cmdCheckpoints},
		{name: "deadletters", args: "[--json] [--follow] " + agent, summary: "the input set aside, and why", main: cmdDeadLetters},
		{name: "top", args: "[--stall DURATION] " + agent + " | --fleet (-c FILE | --broker URL --topic FILTER)", summary: "live terminal UI: barriers, stalls, history; every gateway with --fleet", main: cmdTop},
		{name: "completion", args: strings.Join(shells, "|"), summary: "print a shell completion script",
			operands: shells, main: cmdCompletion},
		{name: "version", summary: "print the version"},
		{name: "help", summary: "print this help"},
	}
}

// usage is cairn's usage: the commands and what they do.
var usage = usageText(commands())

// usageText lists cmds as cairn's usage shows them: the synopsis, and
// what the command does beside it or, when the synopsis is long, below.
func usageText(cmds []command) string {
	const col = 41 // where the summaries start
	var b strings.Builder
	b.WriteString("cairn — an edge stream agent with exactly-once checkpoints\n\nUsage:\n")
	for _, c := range cmds {
		line := strings.TrimSpace("cairn " + c.name + " " + c.args)
		if len(line) > col-4 {
			line += "\n" + strings.Repeat(" ", col)
		}
		fmt.Fprintf(&b, "  %-*s%s\n", col-2, line, c.summary)
	}
	b.WriteString(`
cairn help COMMAND (or cairn COMMAND -h) prints the command's flags.
Without -c FILE or --data-dir DIR, the pipeline file is $CAIRN_CONFIG,
else /etc/cairn/pipeline.yaml.
Commands that talk to a running agent use <data_dir>/cairn.sock: the
agent's user and root may, and members of GROUP when the agent runs with
--control-group GROUP.
Exit status: 0 on success, 1 when the command failed (a data directory
this user may not read included), 3 when no agent is running, 2 on a usage
error or an invalid pipeline file (validate prints FILE:LINE:COL: message
lines).
`)
	return b.String()
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(version, commit, date, info))
		return 0
	case "help", "--help", "-h":
		if len(args) > 1 && args[0] == "help" { // help CMD: the command's usage, as CMD -h prints it
			return run([]string{args[1], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			fs := flag.NewFlagSet("cairn "+c.name, flag.ContinueOnError)
			fs.SetOutput(stderr)
			fs.Usage = func() { c.printUsage(fs) }
			return c.main(fs, args[1:], stdout, stderr)
		}
	}
	moved := ""
	if args[0] == "bench" {
		moved = " (the benchmarks moved to a program of their own, cairn-bench)"
	}
	fmt.Fprintf(stderr, "cairn: unknown command %q%s\n\n%s", args[0], moved, usage)
	return 2
}

// printUsage prints the command's synopsis, what it does and its flags to
// fs's output.
func (c command) printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: cairn %s %s\n\n%s\n", c.name, c.args, c.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, fs)
	}
}

// printFlags lists fs's flags as the usage writes them: a letter with one
// dash (-c), a word with two (--data-dir); the flag package takes either.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name := "-" + f.Name
		if len(f.Name) > 1 {
			name = "-" + name
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			name += " " + arg
		}
		fmt.Fprintf(w, "  %s\n    \t%s", name, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parseFlags parses args with the flags declared on fs. Given -h or
// --help it prints fs.Usage to stdout; given a bad flag, the complaint
// and fs.Usage to fs's output (the command's stderr). When not ok, the
// command returns code: 0 after -h, 2 after a bad flag.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	stderr := fs.Output()
	fs.SetOutput(io.Discard) // the flag package's own printing: each is done below, where it belongs
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return 0, false
	case err != nil:
		return usageError(fs, "%v", err), false
	}
	return 0, true
}

// usageError says what is wrong with a command line, then the command's
// usage, on fs's output (the command's stderr), and returns the exit
// status of a usage error, 2.
func usageError(fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return 2
}

// defaultPipeline is the pipeline file of a command given neither -c nor
// --data-dir: $CAIRN_CONFIG, else /etc/cairn/pipeline.yaml, where the
// .deb installs it.
func defaultPipeline() string {
	if f := os.Getenv("CAIRN_CONFIG"); f != "" {
		return f
	}
	return "/etc/cairn/pipeline.yaml"
}

// flags declares -c and --data-dir, the flags every command that finds an
// agent by its pipeline file or data directory has, and those of more, on
// fs, and parses args, which must be flags only. Given neither, the file
// is defaultPipeline's, if there is one. When not ok, the command returns
// code (see parseFlags).
func flags(fs *flag.FlagSet, args []string, stdout io.Writer, more ...func(*flag.FlagSet)) (file, dataDir string, code int, ok bool) {
	fs.StringVar(&file, "c", "", "the pipeline `FILE` (default $CAIRN_CONFIG, else /etc/cairn/pipeline.yaml)")
	fs.StringVar(&dataDir, "data-dir", "", "the data directory `DIR` (default: the file's agent.data_dir)")
	for _, m := range more {
		m(fs)
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return "", "", code, false
	}
	if fs.NArg() > 0 {
		return "", "", usageError(fs, "unexpected argument %q", fs.Arg(0)), false
	}
	if file == "" && dataDir == "" {
		if _, err := os.Stat(defaultPipeline()); err == nil {
			file = defaultPipeline()
		}
	}
	return file, dataDir, 0, true
}

func cmdRun(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var fromSavepoint, logLevel, controlGroup string
	var allowDropped, acceptLoss bool
	file, dataDir, code, ok := flags(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&fromSavepoint, "from-savepoint", "", "start from this savepoint `FILE`, once: not again after a checkpoint completed since")
		fs.BoolVar(&allowDropped, "allow-dropped-state", false, "drop savepoint state of operators the pipeline no longer has")
		fs.StringVar(&logLevel, "log-level", "", "log at this `LEVEL` (debug, info, warn, error) whatever agent.log_level says")
		fs.BoolVar(&acceptLoss, "accept-state-loss", false, "start even where checkpointed state or ingested messages were lost (a deleted or damaged store or log)")
		fs.StringVar(&controlGroup, "control-group", "", "let this `GROUP` (name or number) use the control socket: mode 0660, not 0600")
	})
	if !ok {
		return code
	}
	if file == "" {
		return usageError(fs, "-c FILE is required (or CAIRN_CONFIG, or /etc/cairn/pipeline.yaml)")
	}
	level := new(slog.LevelVar) // info until the config says otherwise
	configLevel := level        // the agent sets it from the file
	if logLevel != "" {
		if err := level.UnmarshalText([]byte(logLevel)); err != nil {
			fmt.Fprintf(stderr, "cairn run: --log-level %q is not one of debug, info, warn, error\n", logLevel)
			return 2
		}
		configLevel = nil
	}
	handlerOpts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, handlerOpts)
	if config.LogFormat(file) == "json" {
		handler = slog.NewJSONHandler(stderr, handlerOpts)
	}
	log := slog.New(handler)
	// A log that goes nowhere (`cairn run ... 2>&1 | tee log` and Ctrl-C,
	// which ends tee first) must not end the agent before its final
	// checkpoint: a write to the closed pipe then fails with EPIPE, and
	// the agent goes on, rather than die of SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	info, _ := debug.ReadBuildInfo()
	ver, rev, _, _ := whichBuild(version, commit, date, info)
	err := agent.Run(ctx, file, agent.Options{DataDir: dataDir, Logger: log, LogLevel: configLevel, Reload: reload,
		FromSavepoint: fromSavepoint, AllowDroppedState: allowDropped, AcceptStateLoss: acceptLoss,
		ControlGroup: controlGroup, Build: agent.BuildInfo{Version: ver, Commit: rev}, GovernProcessors: true})
	var cerrs config.Errors
	switch {
	case errors.As(err, &cerrs):
		fmt.Fprintln(stderr, cerrs.Error())
		return 2
	case err != nil:
		log.Error("cairn stopped", "err", err)
		return 1
	}
	log.Info("cairn stopped")
	return 0
}

func cmdValidate(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	file, _, code, ok := flags(fs, args, stdout)
	if !ok {
		return code
	}
	if file == "" {
		return usageError(fs, "-c FILE is required (or CAIRN_CONFIG, or /etc/cairn/pipeline.yaml)")
	}
	_, err := config.Load(file)
	var cerrs config.Errors
	switch {
	case errors.As(err, &cerrs):
		fmt.Fprintln(stderr, cerrs.Error())
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "cairn validate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid\n", file)
	return 0
}

func cmdCheckpoints(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var verify bool
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.BoolVar(&verify, "verify", false, "read every checkpoint's state and mark those that fail verification")
	})
	if !ok {
		return code
	}
	// A running agent holds the store: ask it; else read the store, and
	// ask remote storage, if the pipeline file names one, what it holds.
	infos, err := client(dataDir).Checkpoints(context.Background(), verify)
	if err != nil {
		var damage []string
		if infos, damage, err = agent.Checkpoints(dataDir, verify); err != nil {
			fmt.Fprintln(stderr, "cairn checkpoints:", err)
			return 1
		}
		for _, d := range damage {
			fmt.Fprintf(stderr, "cairn checkpoints: the checkpoint store is damaged (%s); left as it is: `cairn run` sets the file aside when it starts, moves what of it verifies into a new one, and restores the newest checkpoint of that\n", d)
		}
		if file := fs.Lookup("c").Value.String(); file != "" {
			cfg, err := config.Load(file)
			switch {
			case err != nil:
				fmt.Fprintln(stderr, "cairn checkpoints: upload states unknown: the pipeline file does not load:", err)
			case cfg.Remote != nil:
				agent.UploadStates(cfg.Remote, infos)
				if len(infos) > 0 && infos[0].UploadError != "" {
					fmt.Fprintln(stderr, "cairn checkpoints: remote storage cannot be read:", infos[0].UploadError)
				}
			}
		}
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	header := "ID\tSIZE\tDURATION\tALIGNMENT\tINCREMENTAL\tKIND\tIN FLIGHT\tUPLOAD"
	if verify {
		header += "\tSTATE"
	}
	fmt.Fprintln(w, header)
	damaged := 0
	for _, c := range infos {
		upload := c.Upload
		if upload == "" {
			upload = "-"
		}
		fmt.Fprintf(w, "%d\t%d B\t%d ms\t%d ms\t%v\t%s\t%d B\t%s", c.ID, c.SizeBytes, c.DurationMS, c.AlignmentMS, c.Incremental, checkpointKind(c), c.InFlightBytes, upload)
		if verify {
			state := "ok"
			if c.Damage != "" {
				state, damaged = "DAMAGED: "+c.Damage, damaged+1
			}
			fmt.Fprintf(w, "\t%s", state)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	if damaged > 0 {
		fmt.Fprintf(stderr, "cairn checkpoints: %d of %d checkpoints fail verification: a restore skips them\n", damaged, len(infos))
		return 1
	}
	return 0
}

// checkpointKind is what a checkpoint is: taken at least once (no
// alignment), aligned, unaligned, or aligned until its alignment timed
// out.
func checkpointKind(c api.CheckpointInfo) string {
	switch {
	case c.Mode == "at-least-once":
		return "at-least-once"
	case c.TimedOut:
		return "timed out"
	case c.Unaligned:
		return "unaligned"
	}
	return "aligned"
}

// dataDirOf parses the flags of a subcommand that works on an agent's data
// directory — -c FILE or --data-dir DIR, plus its own (more) — and returns
// the directory. When not ok, the command returns code (see parseFlags; 2
// also when neither flag is given or the file names no directory).
func dataDirOf(fs *flag.FlagSet, args []string, stdout io.Writer, more ...func(*flag.FlagSet)) (dir string, code int, ok bool) {
	file, dataDir, code, ok := flags(fs, args, stdout, more...)
	switch {
	case !ok:
		return "", code, false
	case dataDir != "":
		return dataDir, 0, true
	case file == "":
		return "", usageError(fs, "-c FILE or --data-dir DIR is required (or CAIRN_CONFIG, or /etc/cairn/pipeline.yaml)"), false
	}
	dir, err := config.DataDir(file)
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		return "", 2, false
	}
	return dir, 0, true
}

// client returns a client of the agent running on dataDir.
func client(dataDir string) *api.Client { return api.NewClient(agent.SocketPath(dataDir)) }

// exitCode reports a failed call to the agent and returns the exit
// status: 3 when no agent is running, 1 otherwise. The client's errors
// name the agent's socket, and so its data directory.
func exitCode(err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "cairn: %v\n", err)
	if errors.Is(err, api.ErrNoAgent) {
		return 3
	}
	return 1
}

// memoryLine says what memory the agent uses, and whether it is near its
// limit.
func memoryLine(m api.Memory) string {
	line := "memory: "
	if m.Resident > 0 {
		line += megabytes(m.Resident) + " resident; "
	}
	line += fmt.Sprintf("heap %s live, may grow to %s", megabytes(m.HeapLive), megabytes(m.HeapGoal))
	if m.Limit == 0 {
		return line
	}
	limit := fmt.Sprintf("%.0f MiB", float64(m.Limit)/(1<<20))
	if m.NearLimit() {
		return line + "; NEAR the limit of " + limit + ": the garbage collector runs almost all the time"
	}
	return line + "; limit " + limit
}

// brokerLine says whether a broker's clients are connected, since when,
// its newest connection error, and, of an embedded broker, what it
// refused its clients, a line a kind, what it dropped of offline
// sessions', a line a client, and the offline sessions it ended, a line
// a why, at now, the status's time: the agent's times less it are what
// its monotonic clock measured (api.Status).
func brokerLine(b api.Broker, now time.Time) string {
	state := "connected"
	if !b.Connected {
		state = fmt.Sprintf("NOT CONNECTED (%d of %d clients)", b.ConnectedClients, b.Clients)
	}
	line := fmt.Sprintf("broker %s: %s for %s", b.ID, state, now.Sub(time.UnixMilli(b.SinceUnixMS)).Round(time.Second))
	if b.LastError != "" {
		line += fmt.Sprintf("; last error %s ago: %s", now.Sub(time.UnixMilli(b.LastErrorUnixMS)).Round(time.Second), b.LastError)
	}
	for _, what := range slices.Sorted(maps.Keys(b.Refused)) {
		line += fmt.Sprintf("\n  refused %d: %s", b.Refused[what], strings.TrimPrefix(what, "embedded broker "))
	}
	for _, id := range slices.Sorted(maps.Keys(b.OfflineDropped)) {
		line += fmt.Sprintf("\n  dropped %d of offline session %q's oldest messages", b.OfflineDropped[id], id)
	}
	for _, why := range slices.Sorted(maps.Keys(b.EndedSessions)) {
		sessions := "sessions"
		if b.EndedSessions[why] == 1 {
			sessions = "session"
		}
		line += fmt.Sprintf("\n  ended %d offline %s %s", b.EndedSessions[why], sessions, why)
	}
	return line
}

// ingestLines say what goes wrong with the ingest logs at now, the
// status's time, and what went wrong since the agent started.
func ingestLines(in api.Ingest, now time.Time) []string {
	var lines []string
	if since := in.NotAcknowledgingSinceUnixMS; since != 0 {
		lines = append(lines, fmt.Sprintf("INPUT NOT ACKNOWLEDGED for %s (the broker keeps it; nothing is lost): %s",
			now.Sub(time.UnixMilli(since)).Round(time.Second), in.NotAcknowledgingReason))
	}
	if in.DamagedRecords > 0 {
		lines = append(lines, fmt.Sprintf("INGEST LOG DAMAGED: %d ranges read past, %d messages lost (dead letters of their sources); the newest: %s",
			in.DamagedRecords, in.LostMessages, in.LastDamage))
	}
	return lines
}

// diskLine says what the agent wrote to its data directory, per file, and
// at what rate.
func diskLine(d api.Disk) string {
	line := fmt.Sprintf("disk: %s written, %d syncs since the start", megabytes(d.WrittenBytes), d.Syncs)
	var files []string
	for _, f := range d.Files {
		files = append(files, fmt.Sprintf("%s %s, %d syncs", f.Name, megabytes(f.WrittenBytes), f.Syncs))
	}
	if len(files) > 0 {
		line += " (" + strings.Join(files, "; ") + ")"
	}
	if d.PerDaySpanSeconds == 0 {
		return line + "; a day's rate once the agent has run 10 minutes"
	}
	return line + "; about " + megabytes(d.PerDayBytes) + " a day at the rate of the last " + (time.Duration(d.PerDaySpanSeconds) * time.Second).Round(time.Minute).String()
}

// megabytes formats n bytes in decimal megabytes.
func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func cmdStatus(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") })
	if !ok {
		return code
	}
	st, err := client(dataDir).Status(context.Background())
	if err != nil {
		return exitCode(err, stderr)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return 0
	}
	fmt.Fprintf(stdout, "%s  %s  %s  up %s\n", st.Pipeline, st.State, st.Mode, (time.Duration(st.UptimeSeconds) * time.Second).String())
	last := "none"
	if l := st.Checkpoints.LastCompleted; l != nil {
		last = fmt.Sprintf("%d (%d ms, %d B)", l.ID, l.DurationMS, l.SizeBytes)
	}
	fmt.Fprintf(stdout, "checkpoints: %d completed, %d failed, %d in progress; last %s\n",
		st.Checkpoints.Completed, st.Checkpoints.Failed, st.Checkpoints.InProgress, last)
	for _, line := range stallLines(st) {
		fmt.Fprintln(stdout, line)
	}
	if r := st.RestoredFrom; r != nil {
		fmt.Fprintf(stdout, "restored from %s checkpoint %d\n", r.Source, r.ID)
	}
	if st.Rebuilt != "" {
		fmt.Fprintf(stdout, "state rebuilt from the ingest log: %s\n", st.Rebuilt)
	}
	if st.ConfigError != "" {
		fmt.Fprintf(stdout, "pipeline file changed but NOT applied (the running pipeline goes on): %s\n", strings.ReplaceAll(st.ConfigError, "\n", "; "))
	}
	if st.InputHeld {
		fmt.Fprintf(stdout, "input held: the sinks hold %d B their brokers have not taken, over agent.max_output_backlog\n", st.OutputBacklogBytes)
	}
	taken := time.UnixMilli(st.TimeUnixMS)
	for _, line := range ingestLines(st.Ingest, taken) {
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintln(stdout, memoryLine(st.Memory))
	fmt.Fprintln(stdout, diskLine(st.Disk))
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	for _, b := range st.Brokers {
		fmt.Fprintln(stdout, brokerLine(b, taken))
	}
	input := fmt.Sprintf("input: ingest lag %d, dead letters %d", st.IngestLag, st.DeadLetters)
	if st.DeadLetters > 0 {
		var causes []string
		for _, c := range []string{"undecodable", "bad_time", "damaged", "rejected", "unpublishable"} { // as api.DeadLetter.Cause
			if n := st.DeadLetterCauses[c]; n > 0 {
				causes = append(causes, fmt.Sprintf("%d %s", n, c))
			}
		}
		input += " (" + strings.Join(causes, ", ") + "; cairn deadletters lists them)"
	}
	fmt.Fprintln(stdout, input)
	fmt.Fprintln(w, "OPERATOR\tPARALLELISM\tRECORDS IN\tRECORDS OUT\tREJECTED")
	for _, op := range st.Operators {
		in, out := op.Records()
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", op.ID, op.Parallelism, in, out, op.Rejected())
	}
	w.Flush()
	for _, op := range st.Operators {
		if n := op.BadTimeRecords; n > 0 {
			fmt.Fprintf(stdout, "source %s: %d readings set aside as dead letters, their event time impossible for the gateway's clock (a device clock is wrong)\n", op.ID, n)
		}
		if k := op.Sink; k != nil {
			fmt.Fprintf(stdout, "sink %s: %d staged, %d published and acknowledged, %d not encodable; %s\n",
				op.ID, k.Staged, k.Published, k.Unencodable, sinkIDs(*k))
		}
	}
	return 0
}

// sinkIDs says whether what a sink publishes again after a restore
// carries the ids it had (docs/checkpoints.md, Output ids), and how many
// restores gave new ones.
func sinkIDs(k api.SinkCounts) string {
	restores := "1 restore"
	if k.Renumbered != 1 {
		restores = fmt.Sprintf("%d restores", k.Renumbered)
	}
	switch {
	case k.ReplayStableIDs && k.Renumbered == 0:
		return "what it publishes again after a restore keeps its ids"
	case k.ReplayStableIDs:
		return "what it publishes again after a restore keeps its ids, but " + restores + " (from a savepoint, from remote storage, or at another parallelism) gave new ones"
	case k.Renumbered == 0:
		return "its input is not ordered: what it publishes again after a restore will carry new ids"
	}
	return "its input is not ordered: what it published again after " + restores + " carried new ids"
}

// cmdStop stops the running agent as SIGTERM does (the sources hold, a
// final checkpoint, the output published), or with --savepoint with a
// savepoint written as cmdSavepoint writes it, named NAME if one follows,
// whose path it prints (without, it says which final checkpoint it took);
// it returns once the agent is gone. A savepoint
// that fails leaves the agent running: exit status 1.
func cmdStop(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var withSavepoint, force bool
	// --savepoint takes a name, if one follows it.
	var name string
	for i, a := range args {
		if (a == "--savepoint" || a == "-savepoint") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			name = args[i+1]
			args = append(args[:i+1:i+1], args[i+2:]...)
			break
		}
	}
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.BoolVar(&withSavepoint, "savepoint", false, "stop with a savepoint, in the data directory's savepoints/, named NAME (a plain file name) if one follows")
		fs.BoolVar(&force, "force", false, "with --savepoint, replace an earlier savepoint of the same name")
	})
	if !ok {
		return code
	}
	if !withSavepoint && force {
		return usageError(fs, "--force is for --savepoint")
	}
	c := client(dataDir)
	resp, err := c.Stop(context.Background(), withSavepoint, name, force)
	if err != nil {
		return exitCode(err, stderr)
	}
	// The agent answered once its pipeline stopped; it exits next.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Status(context.Background())
		if errors.Is(err, api.ErrNoAgent) {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "cairn stop: the agent stopped its pipeline but still answers on %s after a minute\n", c.Socket())
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case withSavepoint:
		fmt.Fprintln(stdout, resp.Path)
	case resp.ID != 0:
		fmt.Fprintf(stdout, "the agent on %s stopped after its final checkpoint, #%d\n", dataDir, resp.ID)
	default:
		fmt.Fprintf(stdout, "the agent on %s stopped without a final checkpoint (its log says why): the next start restores the last one completed\n", dataDir)
	}
	return 0
}

// cmdCheckpoint takes a checkpoint on the running agent and prints its id.
func cmdCheckpoint(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	dataDir, code, ok := dataDirOf(fs, args, stdout)
	if !ok {
		return code
	}
	resp, err := client(dataDir).Checkpoint(context.Background())
	if err != nil {
		return exitCode(err, stderr)
	}
	fmt.Fprintln(stdout, resp.ID)
	return 0
}

// cmdSavepoint takes a savepoint on the running agent, written in its
// data directory's savepoints/ and nowhere else, and prints its path:
// named --name, a plain file name (the agent refuses a path, and says
// so), replacing an earlier savepoint of that name only with --force;
// without a name, savepoint-ID.cairn, of which the agent keeps the newest
// agent.retained_savepoints.
func cmdSavepoint(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var name string
	var force bool
	dataDir, code, ok := dataDirOf(fs, args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "name the savepoint file `NAME`, a plain file name (default savepoint-ID.cairn, of which the agent keeps the newest agent.retained_savepoints)")
		fs.BoolVar(&force, "force", false, "replace an earlier savepoint of the same name")
	})
	if !ok {
		return code
	}
	resp, err := client(dataDir).Savepoint(context.Background(), name, force)
	if err != nil {
		return exitCode(err, stderr)
	}
	fmt.Fprintln(stdout, resp.Path)
	return 0
}

// whichBuild says which cairn this is: its version, commit and a time,
// as "built TIME" or "committed TIME", and whether it is an untagged
// build, not a release. What the build did not stamp (ver, rev, built) is
// taken from info, the build information (nil: none), that go build and
// go install record: the module version if it is a release's tag
// (go install ...@v0.4.0), else VERSION with the short commit as build
// metadata (0.4.0-dev+4143d22, .dirty for a modified tree); the revision
// (with -dirty for a modified tree); and the commit's time, which is not
// the build's. A version with build metadata, stamped or not, is
// untagged.
func whichBuild(ver, rev, built string, info *debug.BuildInfo) (version, commit, when string, untagged bool) {
	if built != "" {
		when = "built " + built
	}
	if info != nil {
		if v := info.Main.Version; ver == "" && releaseTag.MatchString(v) {
			ver = strings.TrimPrefix(v, "v")
		}
		vcs := make(map[string]string)
		for _, s := range info.Settings {
			vcs[s.Key] = s.Value
		}
		if rev == "" && vcs["vcs.revision"] != "" {
			rev = vcs["vcs.revision"]
			if vcs["vcs.modified"] == "true" {
				rev += "-dirty"
			}
		}
		if when == "" && vcs["vcs.time"] != "" {
			when = "committed " + vcs["vcs.time"]
		}
	}
	untagged = ver == "" || strings.Contains(ver, "+")
	if ver == "" {
		ver = strings.TrimSpace(versionFile)
		if short, dirty := strings.CutSuffix(rev, "-dirty"); short != "" {
			ver += "+" + short[:min(len(short), 7)]
			if dirty {
				ver += ".dirty"
			}
		}
	}
	return ver, rev, when, untagged
}

// releaseTag is a release's tag as go install records it (v0.4.0,
// v0.4.0-rc.1): not "(devel)", not a version with build metadata
// (+dirty), nor the pseudo-version Go gives an untagged commit
// (v0.0.0-20261201090000-0123456789ab), whose pre-release part has
// dashes.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// versionLine is what `cairn version` prints: "cairn 1.2.3 (commit
// HASH, built TIME, go1.26.8 linux/arm64)", or for an untagged build
// "cairn 0.4.0-dev+4143d22 (untagged build, commit ...)", from
// whichBuild.
func versionLine(ver, rev, built string, info *debug.BuildInfo) string {
	ver, rev, when, untagged := whichBuild(ver, rev, built, info)
	var about []string
	if untagged {
		about = append(about, "untagged build")
	}
	if rev != "" {
		about = append(about, "commit "+rev)
	}
	if when != "" {
		about = append(about, when)
	}
	about = append(about, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("cairn %s (%s)", ver, strings.Join(about, ", "))
}
