package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/gen/breaking"
	"github.com/worldfoundry/wfgen/gen/glob"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
)

// ConfigName is the name of wfgen's optional configuration file.
const ConfigName = "wfgen.yaml"

// config is a wfgen.yaml: the one place that says where a repository's
// manifests are and where their outputs go, for go:generate, CI and people
// alike. Paths in the file are relative to its folder; the fields here
// hold them relative to the working folder (or absolute). Explicit flags
// and paths on the command line override it.
type config struct {
	// File is the configuration file as found ("" when there is none).
	File string
	// Dir is the file's folder.
	Dir string
	// Inputs are the manifest files and folders used when a command is
	// given no paths.
	Inputs []string
	// Exclude are slash-separated globs, relative to Dir, of files that
	// folders hold but that are not manifests ("**" matches any number of
	// folders).
	Exclude []string
	// GenerateOutput and DocsOutput are the output folders of generate
	// and docs ("" when not set).
	GenerateOutput, DocsOutput string
	// Registry is the name of the aggregate package that generate writes
	// into GenerateOutput when it generates Inputs there ("" when not
	// set; see emit.Aggregate).
	Registry string
	// registryAt is where Registry is set, for errors about it.
	registryAt *configError
	// Allow are breaking-change allowances, as for --allow.
	Allow []breaking.Allow
}

// findConfig looks for wfgen.yaml in the working folder and its parents,
// stopping at the first folder that holds a .git (the repository's root)
// or at the file system's root. No file is no configuration.
func findConfig() (*config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for dir := wd; ; {
		p := filepath.Join(dir, ConfigName)
		if _, err := os.Lstat(p); err == nil {
			return loadConfig(p, wd)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return &config{}, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return &config{}, nil
		}
		dir = parent
	}
}

// configError is a problem in a configuration file, at a line and column.
type configError struct {
	file      string
	line, col int
	msg       string
}

func (e *configError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.file, e.line, e.col, e.msg)
}

// loadConfig reads the configuration file p, strictly: an unknown key, a
// value of the wrong type, a bad glob or allowance is an error at its line
// and column. wd is the working folder the paths are made relative to.
func loadConfig(p, wd string) (*config, error) {
	shown := p
	if r, err := filepath.Rel(wd, p); err == nil {
		shown = r
	}
	data, err := manifest.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	c, err := decodeConfig(data, shown)
	if err != nil {
		return nil, err
	}
	c.File, c.Dir = p, filepath.Dir(p)
	rel := func(q string) string {
		if filepath.IsAbs(q) {
			return q
		}
		if r, err := filepath.Rel(wd, filepath.Join(c.Dir, q)); err == nil {
			return r
		}
		return filepath.Join(c.Dir, q)
	}
	for i, q := range c.Inputs {
		c.Inputs[i] = rel(q)
	}
	if c.GenerateOutput != "" {
		c.GenerateOutput = rel(c.GenerateOutput)
	}
	if c.DocsOutput != "" {
		c.DocsOutput = rel(c.DocsOutput)
	}
	return c, nil
}

// registryError is an error about generate.registry, at its line and
// column.
func (c *config) registryError(format string, args ...any) error {
	e := *c.registryAt
	e.msg = "generate.registry: " + fmt.Sprintf(format, args...)
	return &e
}

// decodeConfig decodes a configuration file's contents (shown names the
// file in errors); paths stay relative to the file's folder.
func decodeConfig(data []byte, shown string) (*config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %s", shown, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	c := &config{}
	if len(doc.Content) == 0 {
		return c, nil // an empty file configures nothing
	}
	d := configDecoder{file: shown}
	root := doc.Content[0]
	d.mapping(root, "", map[string]func(*yaml.Node){
		"inputs":  func(n *yaml.Node) { c.Inputs = d.paths(n, "inputs") },
		"exclude": func(n *yaml.Node) { c.Exclude = d.globs(n) },
		"generate": func(n *yaml.Node) {
			d.mapping(n, "generate.", map[string]func(*yaml.Node){
				"output": func(n *yaml.Node) { c.GenerateOutput = d.path(n, "generate.output") },
				"registry": func(n *yaml.Node) {
					if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
						d.errorf(n, "generate.registry must be a package name")
						return
					}
					if err := naming.CheckPackage(n.Value); err != nil {
						d.errorf(n, "generate.registry: %v", err)
						return
					}
					c.Registry = n.Value
					c.registryAt = &configError{file: shown, line: n.Line, col: n.Column}
				},
			})
		},
		"docs": func(n *yaml.Node) {
			d.mapping(n, "docs.", map[string]func(*yaml.Node){
				"output": func(n *yaml.Node) { c.DocsOutput = d.path(n, "docs.output") },
			})
		},
		"breaking": func(n *yaml.Node) {
			d.mapping(n, "breaking.", map[string]func(*yaml.Node){
				"allow": func(n *yaml.Node) {
					for _, s := range d.strings(n, "breaking.allow") {
						a, err := breaking.ParseAllow(s.value)
						if err != nil {
							d.errorf(s.node, "%v", err)
							continue
						}
						c.Allow = append(c.Allow, a)
					}
				},
			})
		},
	})
	if d.err == nil && c.Registry != "" && (len(c.Inputs) == 0 || c.GenerateOutput == "") {
		d.err = c.registryError("needs inputs and generate.output: the package imports the families generated from the inputs into that folder")
	}
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// configDecoder walks a configuration's node tree, keeping the first error.
type configDecoder struct {
	file string
	err  error
}

func (d *configDecoder) errorf(n *yaml.Node, format string, args ...any) {
	if d.err == nil {
		d.err = &configError{file: d.file, line: n.Line, col: n.Column, msg: fmt.Sprintf(format, args...)}
	}
}

// mapping calls each key's handler with its value; unknown keys and
// repeated keys are errors.
func (d *configDecoder) mapping(n *yaml.Node, prefix string, keys map[string]func(*yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		what := strings.TrimSuffix(prefix, ".")
		if what == "" {
			what = ConfigName
		}
		d.errorf(n, "%s must be a mapping", what)
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		h, ok := keys[k.Value]
		if !ok || k.Kind != yaml.ScalarNode {
			names := make([]string, 0, len(keys))
			for name := range keys {
				names = append(names, name)
			}
			slices.Sort(names)
			d.errorf(k, "unknown key %q (known keys: %s)", prefix+k.Value, prefix+strings.Join(names, ", "+prefix))
			continue
		}
		if seen[k.Value] {
			d.errorf(k, "key %q given twice", prefix+k.Value)
			continue
		}
		seen[k.Value] = true
		h(v)
	}
}

type located struct {
	value string
	node  *yaml.Node
}

// strings reads a sequence of strings (a single string is not accepted).
func (d *configDecoder) strings(n *yaml.Node, key string) []located {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s must be a list of strings", key)
		return nil
	}
	var out []located
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" || e.Value == "" {
			d.errorf(e, "%s: each item must be a non-empty string", key)
			continue
		}
		out = append(out, located{e.Value, e})
	}
	return out
}

func (d *configDecoder) path(n *yaml.Node, key string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Value == "" {
		d.errorf(n, "%s must be a non-empty path", key)
		return ""
	}
	return filepath.FromSlash(n.Value)
}

func (d *configDecoder) paths(n *yaml.Node, key string) []string {
	var out []string
	for _, s := range d.strings(n, key) {
		out = append(out, filepath.FromSlash(s.value))
	}
	return out
}

func (d *configDecoder) globs(n *yaml.Node) []string {
	var out []string
	for _, s := range d.strings(n, "exclude") {
		if strings.HasPrefix(s.value, "/") {
			d.errorf(s.node, "exclude: %q must be relative to the folder of %s", s.value, ConfigName)
			continue
		}
		if _, err := glob.Check(s.value); err != nil {
			d.errorf(s.node, "exclude: bad pattern %q: %v", s.value, err)
			continue
		}
		out = append(out, s.value)
	}
	return out
}

// describes reports whether a run that generates from paths into out is
// the run the configuration describes: its inputs into configuredOut (the
// output folder it sets for the command). Paths compare as absolute,
// cleaned paths; the inputs' order and repeats do not matter. Only such a
// run writes the aggregate package (Registry), and its record entry names
// the configuration file as its source.
func (c *config) describes(out string, paths []string, configuredOut string) bool {
	if c.File == "" || configuredOut == "" || len(c.Inputs) == 0 {
		return false
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	set := func(ps []string) map[string]bool {
		m := make(map[string]bool, len(ps))
		for _, p := range ps {
			m[abs(p)] = true
		}
		return m
	}
	return abs(out) == abs(configuredOut) && maps.Equal(set(paths), set(c.Inputs))
}

// excludes returns the function that tells whether a file found in a
// folder is excluded by the configuration (nil when nothing is).
func (c *config) excludes() func(string) bool {
	if len(c.Exclude) == 0 {
		return nil
	}
	return func(p string) bool {
		abs, err := filepath.Abs(p)
		if err != nil {
			return false
		}
		rel, err := filepath.Rel(c.Dir, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return false
		}
		for _, g := range c.Exclude {
			if glob.Match(g, filepath.ToSlash(rel)) {
				return true
			}
		}
		return false
	}
}
