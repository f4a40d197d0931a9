package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// checkFormat reports an unknown --format value (exit 2) or returns -1.
func checkFormat(name, format string, stderr io.Writer) int {
	if format != "text" && format != "json" && format != "github" {
		return usageError(stderr, name, "unknown --format %q (want text, json or github)", format)
	}
	return -1
}

// loadOptions are the validate options of a command: the configuration's
// excludes, a warning for every file skipped because it is not a regular
// file, and a note for every JSON Schema document skipped (the schema
// "wfgen schema" writes, saved beside the manifests).
func loadOptions(name string, cfg *config, stderr io.Writer) validate.Options {
	return validate.Options{
		Exclude: cfg.excludes(),
		Skipped: func(p string, err error) {
			if js := (*manifest.JSONSchemaError)(nil); errors.As(err, &js) {
				fmt.Fprintf(stderr, "wfgen %s: note: skipped %s, %s\n", name, p, js.What())
				return
			}
			fmt.Fprintf(stderr, "wfgen %s: warning: skipped %v\n", name, err)
		},
	}
}

// loadFamilies loads the manifests under paths for command name, which
// writes what (a "page", a "document") from them: a load error exits 2, a
// problem in the manifests 1 (reported, nothing written), no manifest at
// all 2. code is -1 when the families are there.
func loadFamilies(name, what string, cfg *config, paths []string, stderr io.Writer) (fams []*ir.Family, code int) {
	fams, diags, err := loadOptions(name, cfg, stderr).Paths(paths)
	if err != nil {
		fmt.Fprintf(stderr, "wfgen %s: %v\n", name, err)
		return nil, 2
	}
	if len(diags) > 0 {
		validate.WriteDiagnostics(stderr, "text", diags)
		fmt.Fprintf(stderr, "%d problem(s); no %s written\n", len(diags), what)
		return nil, 1
	}
	if len(fams) == 0 {
		return nil, usageError(stderr, name, "no manifests found in %v", paths)
	}
	return fams, -1
}

// moduleRoot returns the folder of the go.mod nearest to dir (dir itself or
// a parent; dir need not exist), or "" when there is none.
func moduleRoot(dir string) string {
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && st.Mode().IsRegular() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// within returns p relative to dir when p is inside dir (lexically, or
// once symbolic links are resolved), slash-separated.
func within(dir, p string) (string, bool) {
	inside := func(dir, p string) (string, bool) {
		r, err := filepath.Rel(dir, p)
		if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
			return "", false
		}
		return filepath.ToSlash(r), true
	}
	if r, ok := inside(dir, p); ok {
		return r, true
	}
	rd, err1 := filepath.EvalSymlinks(dir)
	rp, err2 := filepath.EvalSymlinks(p)
	if err1 != nil || err2 != nil {
		return "", false
	}
	return inside(rd, rp)
}

// originPath is the path the files generated into out from the manifest at
// p record in their header: slash-separated and relative to the root of
// the Go module that holds out (the nearest go.mod at or above it) when
// the manifest is inside that module, else the manifest's base name. It
// is the same from whatever folder wfgen runs, so a check from another
// folder agrees with one from the root, and no absolute path leaks into a
// header.
func originPath(p, modRoot string) string {
	abs, err := filepath.Abs(p)
	if err == nil && modRoot != "" {
		if r, ok := within(modRoot, abs); ok {
			return r
		}
	}
	return filepath.Base(p)
}

// recordedSource is how the record in out names the manifest at p: its
// path relative to out, slash-separated (absolute when there is none).
func recordedSource(outAbs, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.ToSlash(p)
	}
	if r, err := filepath.Rel(outAbs, abs); err == nil && !filepath.IsAbs(r) {
		return filepath.ToSlash(r)
	}
	return filepath.ToSlash(abs)
}

// coverage returns the function that tells whether a manifest recorded in
// out (by recordedSource) is one of the inputs: one of the files given, or
// a file the folders given would yield (a manifest extension, no hidden
// folder on the way, not excluded).
func coverage(outAbs string, inputs []string, exclude func(string) bool) (func(string) bool, error) {
	type input struct {
		src    string
		folder bool
	}
	var ins []input
	for _, p := range inputs {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		ins = append(ins, input{recordedSource(outAbs, p), st.IsDir()})
	}
	return func(src string) bool {
		for _, in := range ins {
			if !in.folder {
				if src == in.src {
					return true
				}
				continue
			}
			var sub string
			switch {
			case in.src == ".":
				if src == ".." || strings.HasPrefix(src, "../") || strings.HasPrefix(src, "/") {
					continue
				}
				sub = src
			case strings.HasPrefix(src, in.src+"/"):
				sub = src[len(in.src)+1:]
			default:
				continue
			}
			if !wantedInFolder(sub) {
				continue
			}
			if exclude != nil {
				full := filepath.FromSlash(src)
				if !filepath.IsAbs(full) {
					full = filepath.Join(outAbs, full)
				}
				if exclude(full) {
					continue
				}
			}
			return true
		}
		return false
	}, nil
}

// wantedInFolder reports whether a file at the slash path sub below a
// folder is one that validate picks up there.
func wantedInFolder(sub string) bool {
	parts := strings.Split(sub, "/")
	for _, d := range parts[:len(parts)-1] {
		if strings.HasPrefix(d, ".") {
			return false
		}
	}
	return slices.Contains(validate.Extensions, strings.ToLower(filepath.Ext(sub)))
}

// selfCommand is how a printed command should invoke wfgen again: as it
// was invoked when it is an installed or built binary; when it runs from a
// go run, go tool or go test build (an executable the go command made in a
// temporary or cache folder), as "go tool wfgen" in a module whose go.mod
// has wfgen as a tool, else through go run, which works in this module and
// in every module that requires it.
func selfCommand() string {
	exe, err := os.Executable()
	if err == nil && !transientBuild(exe) {
		return shellQuote(os.Args[0])
	}
	if wd, err := os.Getwd(); err == nil && hasTool(moduleRoot(wd)) {
		return "go tool wfgen"
	}
	return "go run " + modulePath + "/cmd/wfgen"
}

// hasTool reports whether the go.mod in modRoot has wfgen as a tool
// ("tool github.com/worldfoundry/wfgen/cmd/wfgen").
func hasTool(modRoot string) bool {
	if modRoot == "" {
		return false
	}
	data, err := manifest.ReadFile(filepath.Join(modRoot, "go.mod"))
	if err != nil {
		return false
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		return false
	}
	for _, t := range f.Tool {
		if t.Path == modulePath+"/cmd/wfgen" {
			return true
		}
	}
	return false
}

// goBuildExe matches the folder of an executable that go run or go test
// built in the temporary folder: .../go-build123/b001/exe.
var goBuildExe = regexp.MustCompile(`(^|/)go-build[0-9]+/b[0-9]+(/exe)?$`)

// transientBuild reports whether exe was built by go run, go tool or go
// test: it lives in a go-build folder of the temporary folder or in the Go
// build cache (a binary someone built into /tmp is not transient).
func transientBuild(exe string) bool {
	if goBuildExe.MatchString(filepath.ToSlash(filepath.Dir(exe))) {
		return true
	}
	var dirs []string
	if c := os.Getenv("GOCACHE"); c != "" {
		dirs = append(dirs, c)
	}
	if c, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(c, "go-build"))
	}
	for _, d := range dirs {
		if _, ok := within(d, exe); ok {
			return true
		}
	}
	return false
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine joins words into a command to paste into a shell.
func commandLine(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}
