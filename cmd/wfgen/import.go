package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/worldfoundry/wfgen/gen/importer"
	"github.com/worldfoundry/wfgen/runtime"
)

func init() {
	commands["import"] = command{
		summary: "write a manifest skeleton from a TorchScript checkpoint or an AOTInductor package (needs a -tags torch build)",
		run:     runImport,
	}
}

// importEngine returns the engine wfgen import opens checkpoints with. It is
// nil unless wfgen is built with -tags torch (import_torch.go), so that a
// default build never links libtorch.
var importEngine func() (runtime.Engine, error)

// noEngineHelp says exactly how to get a wfgen that can import.
const noEngineHelp = `wfgen import: this wfgen was built without the libtorch engine, which import needs
to read a checkpoint's method schemas (validate, generate and breaking never need it,
so the default build links no libtorch and runs in any CI). Build one that has it,
with libtorch installed (Debian: apt-get install libtorch-dev) and CGO_ENABLED=1:

    go build -tags torch ./cmd/wfgen          # in a checkout of github.com/worldfoundry/wfgen
    go install -tags torch github.com/worldfoundry/wfgen/cmd/wfgen@latest
`

const importUsage = `usage: wfgen import [--method NAME]... [--example ARG=FILE.npy]... [--batched] [-o FILE] [--family ID] [--schema REF] CHECKPOINT.pt|PACKAGE.pt2
Writes a manifest skeleton for a TorchScript checkpoint: one task per method
(default: forward), one field per argument, artifacts from the return type, the
checkpoint with its sha256 and size, and TODO where the schema cannot tell —
tensors' dtype and shape among them, which TorchScript schemas never give.
--example gives a Tensor argument an example value: the field gets its dtype
and shape, and a method whose required arguments all have examples is run once
on the CPU so its tensor outputs get theirs. With --batched the examples'
first dimension is the batch: it is named N and the task becomes batchable.
An AOTInductor package (.pt2, exported with examples/aoti/export.py; needs
libtorch >= 2.6) is imported from the call spec it was exported for: one task
forward, its tensor inputs with their dtypes and shapes, its outputs, and its
dynamic batch dimension and range; no --example is needed.
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
	fs.Func("example", "an example value of a Tensor argument, `ARG=FILE.npy` (repeatable): its dtype and shape go into the manifest", func(s string) error {
		name, ex, err := importer.ReadExample(s)
		if err != nil {
			exampleErr = err
			return nil // reported below, with exit status 2 but without the usage text
		}
		if _, dup := opts.Examples[name]; dup {
			return fmt.Errorf("argument %s has two examples", name)
		}
		if opts.Examples == nil {
			opts.Examples = map[string]importer.Example{}
		}
		opts.Examples[name] = ex
		return nil
	})
	fs.BoolVar(&opts.Batched, "batched", false, "the examples' first dimension is the batch dimension: name it N and make their tasks batchable")
	fs.StringVar(&opts.Output, "o", "", "write the manifest to `FILE` (atomically) instead of standard output")
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
	if importEngine == nil {
		io.WriteString(stderr, noEngineHelp)
		return 2
	}
	e, err := importEngine()
	if err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		if errors.Is(err, runtime.ErrNoEngine) {
			io.WriteString(stderr, "wfgen was built with -tags torch but without cgo; rebuild with CGO_ENABLED=1.\n")
		}
		return 2
	}
	if st, err := os.Stat(ckpt); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 2
	} else if !st.Mode().IsRegular() {
		fmt.Fprintf(stderr, "wfgen import: %s is not a file\n", ckpt)
		return 2
	}
	res, err := importer.Import(e, ckpt, opts)
	if err != nil {
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
	if err := importer.WriteFile(opts.Output, res.YAML); err != nil {
		fmt.Fprintf(stderr, "wfgen import: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "wfgen import: wrote %s; fill in its TODOs, then run: %s validate %s\n", opts.Output, selfCommand(), shellQuote(opts.Output))
	return 0
}
