package breaking

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// Prefixes of a reference that say what it is.
const (
	// GitPrefix starts a git revision: "git:origin/main".
	GitPrefix = "git:"
	// PathPrefix starts a manifest file or folder: "path:old/manifests".
	PathPrefix = "path:"
)

// AmbiguousRefError is a bare reference that names both an existing file or
// folder and a git revision. It is refused rather than guessed: a folder
// named after the revision (which a pull request can add) must not replace
// the revision.
type AmbiguousRefError struct {
	// Ref is the reference as given.
	Ref string
}

// Error says which prefix to use.
func (e *AmbiguousRefError) Error() string {
	return fmt.Sprintf("--against %q is both a file or folder and a git revision; write %s%s for the revision or %s%s for the folder",
		e.Ref, GitPrefix, e.Ref, PathPrefix, e.Ref)
}

// Loader reads manifests for a comparison. Files says how files are found
// in folders; its Exclude applies to both sides, so that an excluded file
// never compares as added or removed.
type Loader struct {
	Files validate.Options
}

// LoadRef is Loader{}.LoadRef.
func LoadRef(ctx context.Context, ref string, paths []string) ([]*ir.Family, []validate.Diagnostic, error) {
	return Loader{}.LoadRef(ctx, ref, paths)
}

// LoadGit is Loader{}.LoadGit.
func LoadGit(ctx context.Context, rev string, paths []string) ([]*ir.Family, []validate.Diagnostic, error) {
	return Loader{}.LoadGit(ctx, rev, paths)
}

// LoadRef loads the old side of a comparison. A ref "git:REV" is a git
// revision: the manifests under paths are read from it (see LoadGit). A
// ref "path:P" is a manifest file or folder, loaded like wfgen validate
// loads its paths (paths are then ignored). A bare ref is whichever of
// the two exists; one that is both an existing file or folder and a
// revision of the repository holding paths is an *AmbiguousRefError. It
// returns the valid manifests, the diagnostics of invalid ones, and an
// error for I/O, git or usage problems.
func (l Loader) LoadRef(ctx context.Context, ref string, paths []string) ([]*ir.Family, []validate.Diagnostic, error) {
	if ref == "" {
		return nil, nil, errors.New("empty --against reference")
	}
	if rev, ok := strings.CutPrefix(ref, GitPrefix); ok {
		if rev == "" {
			return nil, nil, fmt.Errorf("--against %q: empty revision after %s", ref, GitPrefix)
		}
		return l.loadGit(ctx, rev, paths, ref)
	}
	if p, ok := strings.CutPrefix(ref, PathPrefix); ok {
		if p == "" {
			return nil, nil, fmt.Errorf("--against %q: empty path after %s", ref, PathPrefix)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("--against %s: %w", ref, err)
		}
		return l.Files.Paths([]string{p})
	}
	if _, err := os.Lstat(ref); err == nil {
		if l.isRevision(ctx, ref, paths) {
			return nil, nil, &AmbiguousRefError{Ref: ref}
		}
		return l.Files.Paths([]string{ref})
	}
	return l.loadGit(ctx, ref, paths, "")
}

// isRevision reports whether rev names a commit in the git repository of
// any of paths.
func (l Loader) isRevision(ctx context.Context, rev string, paths []string) bool {
	if strings.HasPrefix(rev, "-") {
		return false
	}
	for _, p := range paths {
		top, _, err := gitLocate(ctx, p)
		if err != nil {
			continue
		}
		if _, err := git(ctx, top, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err == nil {
			return true
		}
	}
	return false
}

// LoadGit reads the manifests that paths (files and folders of a git
// working tree) held at revision rev, without checking anything out: the
// files are listed with "git ls-tree" and read with "git show REV:PATH".
// Folders are searched recursively for validate.Extensions, skipping hidden
// folders and the files l.Files.Exclude excludes, like wfgen validate does;
// a path that is a file is read whatever its extension. A path that did
// not exist at rev yields nothing. Each manifest is named by the path it
// has (or had) in the working tree, as given. The result is sorted by path.
func (l Loader) LoadGit(ctx context.Context, rev string, paths []string) ([]*ir.Family, []validate.Diagnostic, error) {
	return l.loadGit(ctx, rev, paths, "")
}

// loadGit is LoadGit; prefixed is the reference as given when it carried
// the git: prefix (it changes the message of a revision that does not
// exist).
func (l Loader) loadGit(ctx context.Context, rev string, paths []string, prefixed string) ([]*ir.Family, []validate.Diagnostic, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("no manifest paths given")
	}
	if strings.HasPrefix(rev, "-") {
		return nil, nil, fmt.Errorf("git revision %q must not start with '-'", rev)
	}
	type entry struct{ display, top, commit, name string }
	var entries []entry
	commits := map[string]string{} // toplevel -> resolved commit
	seen := map[string]bool{}
	for _, p := range paths {
		top, rel, err := gitLocate(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		commit, ok := commits[top]
		if !ok {
			out, err := git(ctx, top, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
			if err != nil {
				if prefixed != "" {
					return nil, nil, fmt.Errorf("--against %s: %s is not a revision of the git repository at %s", prefixed, rev, top)
				}
				return nil, nil, fmt.Errorf("%q is neither a file or folder nor a revision of the git repository at %s", rev, top)
			}
			commit = strings.TrimSpace(string(out))
			commits[top] = commit
		}
		args := []string{"ls-tree", "-r", "-z", "--full-tree", commit}
		if rel != "." {
			args = append(args, "--", rel)
		}
		out, err := git(ctx, top, args...)
		if err != nil {
			return nil, nil, err
		}
		var found []entry
		for _, rec := range strings.Split(string(out), "\x00") {
			// "<mode> <type> <object>\t<path>"
			meta, name, ok := strings.Cut(rec, "\t")
			if !ok {
				continue
			}
			if f := strings.Fields(meta); len(f) != 3 || f[1] != "blob" || (f[0] != "100644" && f[0] != "100755") {
				continue // symlinks, submodules
			}
			var display string
			switch {
			case name == rel:
				display = p // the path names this file
			case rel == "." || strings.HasPrefix(name, rel+"/"):
				sub := name
				if rel != "." {
					sub = strings.TrimPrefix(name, rel+"/")
				}
				if !wanted(sub) {
					continue
				}
				display = filepath.Join(p, filepath.FromSlash(sub))
				if l.Files.Exclude != nil && l.Files.Exclude(display) {
					continue
				}
			default:
				continue
			}
			if !seen[display] {
				seen[display] = true
				found = append(found, entry{display: display, top: top, commit: commit, name: name})
			}
		}
		slices.SortFunc(found, func(a, b entry) int { return strings.Compare(a.display, b.display) })
		entries = append(entries, found...)
	}
	var files []*ir.Family
	var diags []validate.Diagnostic
	for _, e := range entries {
		data, err := gitShow(ctx, e.top, e.commit, e.name)
		if err != nil {
			return nil, nil, err
		}
		var f *ir.Family
		var ds []validate.Diagnostic
		if len(data) > manifest.MaxFileSize {
			ds = []validate.Diagnostic{{File: e.display, Line: 1, Column: 1, Message: (&manifest.LimitError{Limit: "max file size", Max: manifest.MaxFileSize, Unit: "bytes"}).Error()}}
		} else {
			f, ds = validate.Bytes(e.display, data)
		}
		if f != nil {
			files = append(files, f)
		}
		diags = append(diags, ds...)
	}
	return files, diags, nil
}

// wanted reports whether a file found below a folder is a manifest that
// wfgen validate would pick up: a known extension and no hidden folder.
func wanted(sub string) bool {
	dirs := strings.Split(path.Dir(sub), "/")
	for _, d := range dirs {
		if d != "." && strings.HasPrefix(d, ".") {
			return false
		}
	}
	return slices.Contains(validate.Extensions, strings.ToLower(path.Ext(sub)))
}

// gitLocate finds the working tree holding p (which may no longer exist)
// and p's slash-separated path relative to its top ("." for the top).
func gitLocate(ctx context.Context, p string) (top, rel string, err error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", "", err
	}
	// The nearest existing folder at or above p, and the rest below it.
	dir, rest := abs, ""
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("%s: no existing folder above it", p)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	out, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", fmt.Errorf("%s is not in a git working tree: %w", p, err)
	}
	top = strings.TrimSpace(string(out))
	realTop, err := filepath.EvalSymlinks(top)
	if err != nil {
		return "", "", err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", "", err
	}
	r, err := filepath.Rel(realTop, filepath.Join(realDir, rest))
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("%s is outside the git working tree %s", p, top)
	}
	return top, filepath.ToSlash(r), nil
}

// maxGitOutput bounds what one git command may print (a tree listing or
// one blob): a manifest larger than manifest.MaxFileSize is refused anyway.
const maxGitOutput = 64 << 20

// git runs one git command in dir and returns its standard output.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0", "GIT_LITERAL_PATHSPECS=1")
	stdout := &limitedBuffer{max: maxGitOutput + 1}
	stderr := &limitedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	if stdout.Len() > maxGitOutput {
		return nil, fmt.Errorf("git %s: output larger than %d bytes", strings.Join(args, " "), maxGitOutput)
	}
	return stdout.Bytes(), nil
}

// gitShow reads one file of a commit.
func gitShow(ctx context.Context, top, commit, name string) ([]byte, error) {
	return git(ctx, top, "show", commit+":"+name)
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
