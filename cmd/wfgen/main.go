// Command wfgen validates model-spec manifests and compiles them into typed
// Go packages. Run "wfgen help" for the subcommands, "wfgen help COMMAND"
// for one of them.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one wfgen subcommand. run returns the process exit code:
// 0 success, 1 invalid input or a difference found, 2 usage or I/O errors.
// Every command prints its usage to standard output and exits 0 when
// called with -h or --help.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand's file in init.
var commands = map[string]command{}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "-version", "--version":
		return runVersion(nil, stdout, stderr)
	case "help":
		return runHelp(args[1:], stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wfgen: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

// runHelp is "wfgen help [COMMAND]".
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintln(stderr, "usage: wfgen help [COMMAND]")
		return 2
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wfgen help: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run([]string{"--help"}, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: wfgen COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n\"wfgen help COMMAND\" or \"wfgen COMMAND --help\" prints a command's usage.")
	fmt.Fprintln(w, "Flags may come before or after the paths; \"--\" ends the flags.")
}
