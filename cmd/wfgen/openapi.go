package main

import (
	"fmt"
	"io"

	"github.com/worldfoundry/wfgen/gen/importer"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

func init() {
	commands["openapi"] = command{
		summary: "print (or write) the OpenAPI 3.1 document of the families wfserve serves",
		run:     runOpenAPI,
	}
}

const openapiUsage = `usage: wfgen openapi [-o FILE] [PATH...]
Prints the OpenAPI 3.1 document of the Open Inference Protocol REST API that
wfserve serves for the manifests' families (the document GET /openapi.json
returns); -o writes it to FILE instead (atomically). PATH is a manifest file
or a folder; without PATHs, the inputs of wfgen.yaml. Exit 0 on success, 1
when a manifest is invalid (its problems are printed), 2 on usage or I/O
errors.`

// runOpenAPI is "wfgen openapi [-o FILE] PATH...".
func runOpenAPI(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("openapi", stderr)
	out := fs.String("o", "", "write the document to `FILE` (atomically) instead of standard output")
	paths, code := parseArgs(fs, openapiUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	cfg, err := findConfig()
	if err != nil {
		return usageError(stderr, "openapi", "%v", err)
	}
	if len(paths) == 0 {
		paths = cfg.Inputs
	}
	if len(paths) == 0 {
		printUsage(stderr, fs, openapiUsage)
		return 2
	}
	fams, code := loadFamilies("openapi", "document", cfg, paths, stderr)
	if code >= 0 {
		return code
	}
	specs := make([]*spec.ModelInferenceSpec, len(fams))
	for i, f := range fams {
		specs[i] = f.Spec
	}
	doc, err := oip.OpenAPI(specs...)
	if err != nil {
		fmt.Fprintf(stderr, "wfgen openapi: %v\n", err)
		return 1
	}
	if *out != "" {
		err = importer.WriteFile(*out, doc)
	} else {
		_, err = stdout.Write(doc)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wfgen openapi: %v\n", err)
		return 2
	}
	return 0
}
