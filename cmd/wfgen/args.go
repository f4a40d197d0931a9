package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// newFlags returns the flag set of a command. Its errors go to stderr; the
// command's usage text is printed by parseArgs, not by the flag package.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // parseArgs prints the usage where it belongs
	return fs
}

// printUsage writes a command's usage text and its flags to w.
func printUsage(w io.Writer, fs *flag.FlagSet, usage string) {
	fmt.Fprintln(w, strings.TrimRight(usage, "\n"))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// parseArgs parses args with fs, allowing flags before, between and after
// the positional arguments ("wfgen validate manifests --format json"). A
// "--" ends the flags: everything after it is positional, even when it
// starts with '-'. It returns the positional arguments, in order, and an
// exit code: -1 to go on, 0 after -h/--help printed the usage to stdout, 2
// after a usage error was reported on stderr.
func parseArgs(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) ([]string, int) {
	flags, rest := splitAtTerminator(fs, args)
	var pos []string
	for {
		if err := fs.Parse(flags); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, fs, usage)
				return nil, 0
			}
			// The flag package printed the error.
			printUsage(stderr, fs, usage)
			return nil, 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		flags = fs.Args()[1:]
	}
	return append(pos, rest...), -1
}

// splitAtTerminator splits args at the first "--" that is not the value of
// a flag: the flags part (which may still hold positional arguments) and
// what follows the "--".
func splitAtTerminator(fs *flag.FlagSet, args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args[:i], args[i+1:]
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
			i++ // the next argument is this flag's value
		}
	}
	return args, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// usageError reports a usage problem of a command and returns exit code 2.
func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "wfgen %s: %s\n", name, fmt.Sprintf(format, args...))
	return 2
}
