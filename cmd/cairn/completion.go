package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// shells are the shells `cairn completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// cmdCompletion prints the completion script of the shell named in args.
// The scripts are made from commands(): every command, its flags as its
// FlagSet declares them and its operands.
func cmdCompletion(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 || !slices.Contains(shells, fs.Arg(0)) {
		return usageError(fs, "name one shell of %s", strings.Join(shells, ", "))
	}
	cmds := completions()
	switch fs.Arg(0) {
	case "bash":
		bashCompletion(stdout, cmds)
	case "zsh":
		zshCompletion(stdout, cmds)
	case "fish":
		fishCompletion(stdout, cmds)
	}
	return 0
}

// completion is what a shell offers for a command.
type completion struct {
	command
	flags []flagInfo
}

// flagInfo is a flag as completion offers it.
type flagInfo struct {
	name  string // as typed: -c, --data-dir
	usage string
	value bool // it takes a value (the next word, a file by default)
}

// completions are the commands with their flags, learnt by running each
// command's main with -h on a FlagSet of completion's own (main declares
// its flags and returns, doing nothing else: see command).
func completions() []completion {
	var out []completion
	for _, c := range commands() {
		cc := completion{command: c}
		if c.main != nil {
			fs := flag.NewFlagSet("cairn "+c.name, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Usage = func() {}
			c.main(fs, []string{"-h"}, io.Discard, io.Discard)
			fs.VisitAll(func(f *flag.Flag) {
				name := "--" + f.Name
				if len(f.Name) == 1 {
					name = "-" + f.Name
				}
				b, ok := f.Value.(interface{ IsBoolFlag() bool })
				cc.flags = append(cc.flags, flagInfo{name: name, usage: f.Usage, value: !ok || !b.IsBoolFlag()})
			})
		}
		out = append(out, cc)
	}
	return out
}

// topFlags are the flags cairn takes in place of a command.
var topFlags = []flagInfo{{name: "--help", usage: "print this help"}, {name: "--version", usage: "print the version"}}

func bashCompletion(w io.Writer, cmds []completion) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	for _, f := range topFlags {
		names = append(names, f.name)
	}
	fmt.Fprintf(w, `# bash completion for cairn, printed by "cairn completion bash". Load it with
#   source <(cairn completion bash)
# or save it as ~/.local/share/bash-completion/completions/cairn.
_cairn() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words= valued=
	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W '%s' -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, c := range cmds {
		var words, valued []string
		for _, f := range c.flags {
			words = append(words, f.name)
			if f.value {
				valued = append(valued, f.name)
			}
		}
		if c.main != nil {
			words = append(words, "--help")
		}
		words = append(words, c.operands...)
		if len(words) > 0 {
			fmt.Fprintf(w, "\t%s) words='%s' valued='%s' ;;\n", c.name, strings.Join(words, " "), strings.Join(valued, " "))
		}
	}
	fmt.Fprint(w, `	esac
	case " $valued " in
	*" $prev "*) return ;; # a flag's value: the shell's own completion, files
	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _cairn cairn
`)
}

func zshCompletion(w io.Writer, cmds []completion) {
	fmt.Fprint(w, `#compdef cairn
# zsh completion for cairn, printed by "cairn completion zsh". Save it as
# _cairn in a directory of $fpath, or load it with
#   source <(cairn completion zsh)
compdef _cairn cairn

_cairn() {
	local state line
	_arguments -C '1:command:->command' '*::argument:->argument'
	case $state in
	command)
		local -a commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "\t\t\t%s\n", zshQuote(c.name+":"+c.summary))
	}
	fmt.Fprint(w, "\t\t)\n\t\t_describe -t commands command commands\n")
	fmt.Fprint(w, "\t\tlocal -a flags=(")
	for _, f := range topFlags {
		fmt.Fprintf(w, " %s", zshQuote(f.name+":"+f.usage))
	}
	fmt.Fprint(w, ` )
		_describe -t flags flag flags
		;;
	argument)
		case $words[1] in
`)
	for _, c := range cmds {
		var specs []string
		for _, f := range c.flags {
			spec := f.name + "[" + zshEscape(f.usage) + "]"
			if f.value {
				spec += ":value:_files"
			}
			specs = append(specs, zshQuote(spec))
		}
		if len(c.operands) > 0 {
			specs = append(specs, zshQuote("*:"+c.name+":("+strings.Join(c.operands, " ")+")"))
		}
		if len(specs) > 0 {
			fmt.Fprintf(w, "\t\t%s) _arguments \\\n\t\t\t%s ;;\n", c.name, strings.Join(specs, " \\\n\t\t\t"))
		}
	}
	fmt.Fprint(w, `		esac
		;;
	esac
}

if [ "$funcstack[1]" = "_cairn" ]; then
	_cairn "$@"
fi
`)
}

// zshQuote quotes s for zsh in single quotes.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshEscape escapes the characters that end a flag's description in an
// _arguments spec, which runs to the first ] not after a backslash.
func zshEscape(s string) string { return strings.NewReplacer(`\`, `\\`, `]`, `\]`).Replace(s) }

func fishCompletion(w io.Writer, cmds []completion) {
	fmt.Fprint(w, `# fish completion for cairn, printed by "cairn completion fish". Save it as
# ~/.config/fish/completions/cairn.fish, or load it with
#   cairn completion fish | source
complete -c cairn -f
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c cairn -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, f := range topFlags {
		fmt.Fprintf(w, "complete -c cairn -n __fish_use_subcommand -l %s -d %s\n", strings.TrimPrefix(f.name, "--"), fishQuote(f.usage))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			opt := "-l " + strings.TrimPrefix(f.name, "--")
			if !strings.HasPrefix(f.name, "--") {
				opt = "-s " + strings.TrimPrefix(f.name, "-")
			}
			if f.value {
				opt += " -r -F"
			}
			fmt.Fprintf(w, "complete -c cairn -n %s %s -d %s\n", cond, opt, fishQuote(f.usage))
		}
		if len(c.operands) > 0 {
			fmt.Fprintf(w, "complete -c cairn -n %s -a %s\n", cond, fishQuote(strings.Join(c.operands, " ")))
		}
	}
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
