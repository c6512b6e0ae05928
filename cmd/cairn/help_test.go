package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestHelpAndCompletion runs the built binary: asked for help, cairn and
// each command print their usage on stdout and exit 0; a usage error
// prints it on stderr and exits 2. The bash completion script parses,
// completes commands, flags and operands, and offers every command the
// usage lists with every flag its -h lists; the zsh and fish scripts
// parse where those shells are installed.
func TestHelpAndCompletion(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	cairn := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		return cairntest.Run(t, bin, args...)
	}
	_, usage, _ := cairn("help")
	var commands []string // as the usage lists them
	for _, m := range regexp.MustCompile(`(?m)^  cairn ([a-z]+)`).FindAllStringSubmatch(usage, -1) {
		commands = append(commands, m[1])
	}
	if !slices.Contains(commands, "completion") || !slices.Contains(commands, "top") {
		t.Fatalf("the usage lists %v:\n%s", commands, usage)
	}

	t.Run("help", func(t *testing.T) {
		for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
			if code, out, errOut := cairn(args...); code != 0 || out != usage || errOut != "" {
				t.Errorf("cairn %v: exit status %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, out, errOut)
			}
		}
		for _, c := range commands {
			if c == "help" || c == "version" {
				continue
			}
			for _, h := range []string{"-h", "--help"} {
				code, out, errOut := cairn(c, h)
				if code != 0 || !strings.HasPrefix(out, "usage: cairn "+c) || errOut != "" {
					t.Errorf("cairn %s %s: exit status %d, stdout %q, stderr %q; want 0 and its usage on stdout", c, h, code, out, errOut)
				}
			}
		}
		for _, tc := range []struct {
			args []string
			says string
		}{
			{nil, "Usage:"},
			{[]string{"frobnicate"}, `cairn: unknown command "frobnicate"`},
			{[]string{"--frobnicate"}, `cairn: unknown command "--frobnicate"`},
			{[]string{"status", "--frob"}, "cairn status: flag provided but not defined: -frob"},
			{[]string{"status"}, "cairn status: -c FILE or --data-dir DIR is required"},
			{[]string{"top", "--data-dir", "d", "extra"}, `cairn top: unexpected argument "extra"`},
			{[]string{"run", "--json"}, "cairn run: flag provided but not defined: -json"},
			{[]string{"completion", "tcsh"}, "cairn completion: name one shell of bash, zsh, fish"},
			{[]string{"completion"}, "cairn completion: name one shell"},
			{[]string{"bench", "wear"}, `cairn: unknown command "bench" (the benchmarks moved to a program of their own, cairn-bench)`},
		} {
			code, out, errOut := cairn(tc.args...)
			if code != 2 || out != "" || !strings.Contains(errOut, tc.says) || !strings.Contains(errOut, "sage") {
				t.Errorf("cairn %v: exit status %d, stdout %q, stderr %q; want 2 and %q with the usage on stderr", tc.args, code, out, errOut, tc.says)
			}
		}
	})

	t.Run("completion", func(t *testing.T) {
		dir := t.TempDir()
		scripts := map[string]string{}
		for _, shell := range []string{"bash", "zsh", "fish"} {
			code, out, errOut := cairn("completion", shell)
			if code != 0 || errOut != "" || !strings.Contains(out, "cairn") {
				t.Fatalf("cairn completion %s: exit status %d, stderr %q", shell, code, errOut)
			}
			scripts[shell] = filepath.Join(dir, "cairn."+shell)
			if err := os.WriteFile(scripts[shell], []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := exec.LookPath(shell); err != nil {
				t.Logf("%s is not installed: its script is not checked", shell)
				continue
			}
			if out, err := exec.Command(shell, "-n", scripts[shell]).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
		}
		if _, err := exec.LookPath("bash"); err != nil {
			t.Skip("bash is not installed")
		}
		// complete is what the bash completion offers for the line, the
		// cursor at its end.
		complete := func(line string) []string {
			t.Helper()
			out, err := exec.Command("bash", "-c", `source "$1" || exit
read -ra COMP_WORDS <<<"$2"
[[ $2 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_cairn
printf '%s\n' "${COMPREPLY[@]}"`, "bash", scripts["bash"], line).CombinedOutput()
			if err != nil {
				t.Fatalf("completing %q: %v\n%s", line, err, out)
			}
			return strings.Fields(string(out))
		}
		for line, want := range map[string][]string{
			"cairn ch":                {"checkpoint", "checkpoints"},
			"cairn checkpoints":       {"checkpoints"},
			"cairn deadletters --f":   {"--follow"},
			"cairn completion ":       {"--help", "bash", "zsh", "fish"},
			"cairn b":                 nil, // bench is cairn-bench's
			"cairn completion z":      {"zsh"},
			"cairn --v":               {"--version"},
			"cairn top -c ":           nil, // a file: the shell's own completion
			"cairn run --log-level ":  nil,
			"cairn status --json --d": {"--data-dir"},
		} {
			if got := complete(line); !slices.Equal(got, want) {
				t.Errorf("completing %q offers %q, want %q", line, got, want)
			}
		}
		for _, c := range commands {
			if got := complete("cairn " + c); !slices.Contains(got, c) {
				t.Errorf("completing %q offers %q, not the command", "cairn "+c, got)
			}
			if c == "help" || c == "version" {
				continue
			}
			_, help, _ := cairn(c, "-h")
			offered := complete("cairn " + c + " -")
			for _, m := range regexp.MustCompile(`(?m)^  (-\S+)`).FindAllStringSubmatch(help, -1) {
				if f := m[1]; !slices.Contains(offered, f) {
					t.Errorf("cairn %s -h lists %s, which completing %q does not offer (%q)", c, f, "cairn "+c+" -", offered)
				}
			}
		}
	})
}

// TestCommandManners: cairn help COMMAND prints what COMMAND -h does; a
// command's flags are listed as its synopsis writes them (-c, --data-dir),
// with the words they take; without -c or --data-dir a command reads the
// pipeline file $CAIRN_CONFIG names.
func TestCommandManners(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	for _, c := range []string{"run", "status", "stop", "top"} {
		code, help, _ := cairntest.Run(t, bin, "help", c)
		_, dashH, _ := cairntest.Run(t, bin, c, "-h")
		if code != 0 || help != dashH || !strings.HasPrefix(help, "usage: cairn "+c) {
			t.Errorf("cairn help %s: exit %d\n%s\nwant what cairn %s -h prints:\n%s", c, code, help, c, dashH)
		}
		if !strings.Contains(help, "\n  -c FILE\n") || !strings.Contains(help, "\n  --data-dir DIR\n") || regexp.MustCompile(`\n  -[a-z][a-z-]+`).MatchString(help) {
			t.Errorf("cairn help %s lists its flags unlike its synopsis:\n%s", c, help)
		}
	}
	dir := t.TempDir()
	pipeline := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(pipeline, []byte("sources:\n  - {id: s, simulator: {devices: 1, rate: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "validate")
	cmd.Env = append(os.Environ(), "CAIRN_CONFIG="+pipeline)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != pipeline+": valid" {
		t.Fatalf("cairn validate with CAIRN_CONFIG: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "status")
	cmd.Env = append(os.Environ(), "CAIRN_CONFIG="+pipeline)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "agent not running: no control socket at "+filepath.Join(dir, "data")) {
		t.Fatalf("cairn status with CAIRN_CONFIG: %v\n%s; want it to look in the file's data directory", err, out)
	}
}
