package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/gen/convert"
	"github.com/worldfoundry/wfgen/gen/importer"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["convert"] = command{
		summary: "turn a spec dict the Python runtime wrote (to_dict) into a manifest",
		run:     runConvert,
	}
}

const convertUsage = `usage: wfgen convert [-o FILE] [--format text|json|github] DICT
DICT is a spec dict the Python runtime wrote, json.dump(spec.to_dict()) (JSON,
or YAML when its name does not end in .json). wfgen validate refuses it as it
is: it has no schema_version, and each variant carries model_ref and
checkpoint_map, which Python derives from its checkpoints. convert adds
schema_version, checks each model_ref and checkpoint_map against the
checkpoints and drops them, keeps everything else as written, and writes the
manifest as YAML in the dict's key order to standard output, or to FILE
(atomically; a YAML name). The manifest is validated first: every problem is
reported at its place in DICT, and nothing is written. Exit 0 written, 1 when
DICT does not convert to a valid manifest, 2 on usage or I/O errors.`

// runConvert is "wfgen convert [-o FILE] [--format F] DICT".
func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("convert", stderr)
	out := fs.String("o", "", "write the manifest to `FILE` (atomically; its folder is made when missing) instead of standard output")
	format := fs.String("format", "text", "problems' output `format`: text, json or github")
	paths, code := parseArgs(fs, convertUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(paths) != 1 {
		printUsage(stderr, fs, convertUsage)
		return 2
	}
	if code := checkFormat("convert", *format, stderr); code >= 0 {
		return code
	}
	if *out != "" && manifest.IsJSON(*out) {
		return usageError(stderr, "convert", "-o %s: convert writes YAML; name the file .yaml", *out)
	}
	data, err := manifest.ReadFile(paths[0])
	if err != nil {
		fmt.Fprintf(stderr, "wfgen convert: %v\n", err)
		return 2
	}
	res, diags := convert.PythonDict(paths[0], data)
	if len(diags) > 0 {
		if err := validate.WriteDiagnostics(stdout, *format, diags); err != nil {
			fmt.Fprintf(stderr, "wfgen convert: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "wfgen convert: %d problem(s); nothing written\n", len(diags))
		return 1
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "wfgen convert: warning: %s\n", strings.ReplaceAll(w, "\n", " "))
	}
	if *out == "" {
		if _, err := stdout.Write(res.YAML); err != nil {
			fmt.Fprintf(stderr, "wfgen convert: %v\n", err)
			return 2
		}
		return 0
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintf(stderr, "wfgen convert: %v\n", err)
		return 2
	}
	if err := importer.WriteFile(*out, res.YAML); err != nil {
		fmt.Fprintf(stderr, "wfgen convert: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "wfgen convert: wrote %s; check its checkpoints with: %s validate %s\n", *out, selfCommand(), shellQuote(*out))
	return 0
}
