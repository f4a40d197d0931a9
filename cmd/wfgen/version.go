package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	commands["version"] = command{
		summary: "print the wfgen version, its VCS revision and the Go version",
		run:     runVersion,
	}
}

// modulePath is wfgen's module.
const modulePath = "github.com/worldfoundry/wfgen"

// runVersion is "wfgen version" (also "wfgen --version").
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	const u = "usage: wfgen version\nPrints the wfgen module version, the VCS revision it was built from (when the\nbuild recorded one) and the Go version that built it."
	pos, code := parseArgs(fs, u, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		printUsage(stderr, fs, u)
		return 2
	}
	bi, _ := debug.ReadBuildInfo()
	io.WriteString(stdout, versionText(bi))
	return 0
}

// versionText renders the build information of a wfgen binary:
//
//	wfgen v1.2.0
//	revision 3f1c2e0d... (modified)   (only when the build recorded one)
//	built with go1.26.8 linux/amd64
//
// A wfgen built as a dependency of another module (go tool, go run in a
// downstream module) reports the version of the wfgen module it was built
// from; a build from a checkout reports "(devel)".
func versionText(bi *debug.BuildInfo) string {
	var b strings.Builder
	version, goVersion := "(unknown)", runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
		if m := wfgenModule(bi); m != nil && m.Version != "" {
			version = m.Version
			if m.Replace != nil {
				version += " => " + m.Replace.Path
				if m.Replace.Version != "" {
					version += " " + m.Replace.Version
				}
			}
		}
	}
	fmt.Fprintf(&b, "wfgen %s\n", version)
	if bi != nil {
		var rev, modified, when string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				when = s.Value
			}
		}
		if rev != "" {
			b.WriteString("revision " + rev)
			if when != "" {
				b.WriteString(" " + when)
			}
			if modified == "true" {
				b.WriteString(" (modified)")
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "built with %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// wfgenModule returns the wfgen module of a build: the main module when
// wfgen was built from its own module, else the dependency.
func wfgenModule(bi *debug.BuildInfo) *debug.Module {
	if bi.Main.Path == modulePath {
		return &bi.Main
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			return d
		}
	}
	return nil
}
