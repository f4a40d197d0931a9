package engine

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Checkpoint formats belong to the engines that read them: each engine
// says which it loads (Engine.Formats), and a checkpoint goes to a
// registered engine that reads its format (ForFormat). The format of a
// file is recognised here, in pure Go, so that processes without an
// engine (wfgen validate and import) tell formats as the client does.

// DetectFormat recognises a checkpoint from its contents: a zip
// holding data/aotinductor/ (at its top or under one folder) is an
// AOTInductor package, one holding <folder>/data.pkl a TorchScript archive.
// It returns "" for anything else.
func DetectFormat(r io.ReaderAt, size int64) spec.CheckpointFormat {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return ""
	}
	var format spec.CheckpointFormat
	for _, f := range zr.File {
		parts := strings.Split(f.Name, "/")
		switch {
		case len(parts) >= 3 && parts[0] == "data" && parts[1] == "aotinductor",
			len(parts) >= 4 && parts[1] == "data" && parts[2] == "aotinductor":
			return spec.FormatAOTInductor
		case len(parts) == 2 && parts[1] == "data.pkl":
			format = spec.FormatTorchScript
		}
	}
	return format
}

// FormatOf opens path and recognises its format (DetectFormat); "" when
// it is neither format.
func FormatOf(path string) (spec.CheckpointFormat, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", nil
	}
	return DetectFormat(f, st.Size()), nil
}

// ResolveFormat returns the format a checkpoint file is run as:
// declared when it is not "" (the manifest wins), else the format
// recognised from the file, else TorchScript. A file recognised as the
// other format than the one declared is an error naming both.
func ResolveFormat(path string, declared spec.CheckpointFormat) (spec.CheckpointFormat, error) {
	if declared != "" && !declared.Valid() {
		return "", fmt.Errorf("checkpoint format %q: want torchscript or aotinductor", declared)
	}
	found, err := FormatOf(path)
	if err != nil {
		return "", err
	}
	switch {
	case declared != "" && found != "" && found != declared:
		return "", fmt.Errorf("%s is %s, but format %s was declared for it", path, found.Describe(), declared)
	case declared != "":
		return declared, nil
	case found != "":
		return found, nil
	}
	return spec.FormatTorchScript, nil
}

// Reads reports whether e loads checkpoints of format f.
func Reads(e Engine, f spec.CheckpointFormat) bool { return slices.Contains(e.Formats(), f) }

// FormatError is the error of a checkpoint whose format no engine at hand
// reads: none of the registered ones (ForFormat), or not the one a caller
// chose (CheckReads).
type FormatError struct {
	// Format is the checkpoint's format.
	Format spec.CheckpointFormat
	// Engines are the engines asked, each as "NAME VERSION reads
	// FORMATS": "libtorch 1.13.1 reads torchscript".
	Engines []string
}

// Error names the format and what each engine asked reads.
func (e *FormatError) Error() string {
	return fmt.Sprintf("no engine reads %s (format %s): %s", e.Format.Describe(), e.Format, strings.Join(e.Engines, "; "))
}

// readsText is "NAME VERSION reads FORMATS" for e registered as name.
func readsText(name string, e Engine) string {
	fs := make([]string, len(e.Formats()))
	for i, f := range e.Formats() {
		fs[i] = string(f)
	}
	reads := strings.Join(fs, ", ")
	if reads == "" {
		reads = "no format"
	}
	return fmt.Sprintf("%s %s reads %s", name, e.Version(), reads)
}

// CheckReads returns nil when e reads format f, else a *FormatError naming
// what e reads.
func CheckReads(e Engine, f spec.CheckpointFormat) error {
	if Reads(e, f) {
		return nil
	}
	return &FormatError{Format: f, Engines: []string{readsText(e.Name(), e)}}
}
