package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/worldfoundry/wfgen/gen/importer"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

func init() {
	commands["import"] = command{
		summary: "write a manifest skeleton from a TorchScript checkpoint or an AOTInductor package",
		run:     runImport,
	}
}

// importEngine returns the engine wfgen import runs examples with
// (--example). It is nil unless wfgen is built with -tags torch
// (import_torch.go), so that a default build never links libtorch: it
// reads signatures and call specs from the checkpoint file itself.
var importEngine func() (engine.Engine, error)

// exampleNeedsEngine says why --example needs another wfgen and how to
// build one: go build in the user's module honours its replace directives
// (go install ...@latest does not), and names the binary so that it does
// not shadow the default one.
func exampleNeedsEngine(w io.Writer, args []string, opts importer.Options, ckpt string) {
	without := []string{"import"}
	for _, m := range opts.Methods {
		without = append(without, "--method", m)
	}
	for _, f := range [][2]string{{"-o", opts.Output}, {"--family", opts.FamilyID}, {"--schema", opts.SchemaRef}} {
		if f[1] != "" {
			without = append(without, f[0], f[1])
		}
	}
	without = append(without, "--", ckpt)
	fmt.Fprintf(w, `wfgen import: --example runs the model on the examples to learn its outputs' dtypes and
shapes, which needs the libtorch engine, and this wfgen was built without it (the default
build links no libtorch: validate, generate, breaking and import without examples never
need it). Without --example this wfgen imports the checkpoint from its signatures, tensors'
dtypes and shapes left as TODOs:

    %s %s

For --example, build a wfgen with the engine in your module (go build honours its
replace directives), with cgo (CGO_ENABLED=1 and a C++ compiler) and libtorch
(Debian: apt-get install libtorch-dev), then run it with the same arguments:

    go build -tags torch -o wfgen-torch github.com/worldfoundry/wfgen/cmd/wfgen
    %s
`, selfCommand(), commandLine(without...), commandLine(append([]string{"./wfgen-torch", "import"}, args...)...))
}

const importUsage = `usage: wfgen import [--method NAME]... [--example ARG=FILE.npy]... [--batched] [-o FILE] [--family ID] [--schema REF] CHECKPOINT.pt|PACKAGE.pt2
Writes a manifest skeleton for a TorchScript checkpoint from the method
signatures its code declares: one task per method (default: forward), one
field per argument, artifacts from the return type, the checkpoint with its
sha256 and size, and TODO where the signature cannot tell — tensors' dtype and
shape among them, which TorchScript signatures never give.
--example gives a Tensor argument an example value (a List[Tensor] argument
one per item: the flag repeated, in order): the field gets its dtype and shape, and a method whose required arguments all have examples is run once
on the CPU so its tensor outputs get theirs; running needs a wfgen built with
-tags torch (cgo and libtorch). With --batched the examples' first dimension
is the batch: it is named N and the task becomes batchable.
An AOTInductor package (.pt2, exported with examples/aoti/export.py) is
imported from the call spec it was exported for: one task forward, its tensor
inputs with their dtypes and shapes, its outputs, and its dynamic batch
dimension and range; no --example is needed.
Without -o the manifest goes to standard output. Exit 0 on success, 1 when the
checkpoint cannot be imported, 2 on usage or I/O errors.`

// runImport is "wfgen import [--method NAME]... [-o FILE] [--family ID] CHECKPOINT".
func runImport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("import", stderr)
	var opts importer.Options
	fs.Func("method", "a TorchScript `NAME` to import as a task (repeatable; default forward)", func(s string) error {
		opts.Methods = append(opts.Methods, s)
		return nil
	})
	var exampleErr error
	fs.Func("example", "an example value of a Tensor argument, `ARG=FILE.npy` (repeatable; repeated for one List[Tensor] argument, its items in order): its dtype and shape go into the manifest", func(s string) error {
		name, ex, err := importer.ReadExample(s)
		if err != nil {
			exampleErr = err
			return nil // reported below, with exit status 2 but without the usage text
		}
		if opts.Examples == nil {
			opts.Examples = map[string]importer.Example{}
		}
		if first, again := opts.Examples[name]; again {
			ex = first.Add(ex) // the next item of a List[Tensor] argument
		}
		opts.Examples[name] = ex
		return nil
	})
	fs.BoolVar(&opts.Batched, "batched", false, "the examples' first dimension is the batch dimension: name it N and make their tasks batchable")
	fs.StringVar(&opts.Output, "o", "", "write the manifest to `FILE` (atomically; its folder is made when missing) instead of standard output")
	fs.StringVar(&opts.FamilyID, "family", "", "model_family_id (default: from the checkpoint's file name)")
	fs.StringVar(&opts.SchemaRef, "schema", "", "$schema of the yaml-language-server header (default "+importer.DefaultSchemaRef+")")
	paths, code := parseArgs(fs, importUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(paths) != 1 {
		printUsage(stderr, fs, importUsage)
		return 2
	}
	if exampleErr != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", exampleErr)
		return 2
	}
	if opts.Batched && len(opts.Examples) == 0 {
		fmt.Fprintln(stderr, "wfgen import: --batched says the examples are batches; give them with --example ARG=FILE.npy")
		return 2
	}
	ckpt := paths[0]
	if st, err := os.Stat(ckpt); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 2
	} else if !st.Mode().IsRegular() {
		fmt.Fprintf(stderr, "wfgen import: %s is not a file\n", ckpt)
		return 2
	}
	var res *importer.Result
	var err error
	if format, _ := engine.FormatOf(ckpt); len(opts.Examples) > 0 && format != spec.FormatAOTInductor {
		// Examples run the model: the engine. (A package takes no
		// examples; ImportFile says so.)
		if importEngine == nil {
			exampleNeedsEngine(stderr, args, opts, ckpt)
			return 2
		}
		e, err := importEngine()
		if err != nil {
			fmt.Fprintf(stderr, "wfgen import: %v\n", err)
			if errors.Is(err, engine.ErrNoEngine) {
				io.WriteString(stderr, "wfgen was built with -tags torch but without cgo; rebuild with CGO_ENABLED=1.\n")
			}
			return 2
		}
		res, err = importer.Import(e, ckpt, opts)
		if err != nil {
			fmt.Fprintf(stderr, "wfgen import: %v\n", err)
			return 1
		}
	} else if res, err = importer.ImportFile(ckpt, opts); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 1
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "wfgen import: warning: %s\n", w)
	}
	if opts.Output == "" {
		if _, err := stdout.Write(res.YAML); err != nil {
			fmt.Fprintf(stderr, "wfgen import: %v\n", err)
			return 2
		}
		return 0
	}
	// -o manifests/x.yaml is the first step in a new module: the folder
	// is made when missing.
	if err := os.MkdirAll(filepath.Dir(opts.Output), 0o755); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 2
	}
	if err := importer.WriteFile(opts.Output, res.YAML); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "wfgen import: wrote %s; fill in its TODOs, then run: %s validate %s\n", opts.Output, selfCommand(), shellQuote(opts.Output))
	return 0
}
