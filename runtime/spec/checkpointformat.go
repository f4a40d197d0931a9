package spec

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// CheckpointFormat says how a checkpoint file is run.
type CheckpointFormat string

// Checkpoint formats.
const (
	// FormatTorchScript is a TorchScript archive (torch.jit.save), run by
	// every supported libtorch.
	FormatTorchScript CheckpointFormat = "torchscript"
	// FormatAOTInductor is an AOTInductor package (.pt2, written by
	// torch._inductor.aoti_compile_and_package): a model compiled ahead of
	// time, run by libtorch 2.6 or later.
	FormatAOTInductor CheckpointFormat = "aotinductor"
)

// CheckpointFormats lists the formats a manifest may declare.
var CheckpointFormats = []CheckpointFormat{FormatTorchScript, FormatAOTInductor}

// Valid reports whether f is one of CheckpointFormats.
func (f CheckpointFormat) Valid() bool { return f == FormatTorchScript || f == FormatAOTInductor }

// extensionFormats are the file extensions that name a format.
var extensionFormats = map[string]CheckpointFormat{
	".pt2": FormatAOTInductor,
	".pt":  FormatTorchScript,
}

// FormatProblems checks the checkpoint's format against the extension of
// its URI: a URI ending in .pt2 (an AOTInductor package's name) with format
// torchscript, or in .pt (a TorchScript archive's) with format aotinductor,
// names one format and declares the other, so one of them is a mistake.
// Other extensions say nothing. Paths are relative to the checkpoint.
func (c *InferenceCheckpointRef) FormatProblems() []Problem {
	if c.Format == "" {
		return nil
	}
	if !c.Format.Valid() {
		return []Problem{{Path: "format", Message: fmt.Sprintf("format %q is not torchscript or aotinductor", c.Format)}}
	}
	ext := strings.ToLower(path.Ext(strings.TrimRight(c.URI, "/")))
	if named, ok := extensionFormats[ext]; ok && named != c.Format {
		return []Problem{{Path: "format", Message: fmt.Sprintf(
			"format %s, but the uri %q ends in %s, the extension of %s; fix the format or the file name", c.Format, c.URI, ext, named.Describe())}}
	}
	return nil
}

// DetectCheckpointFormat recognises a checkpoint from its contents: a zip
// holding data/aotinductor/ (at its top or under one folder) is an
// AOTInductor package, one holding <folder>/data.pkl a TorchScript archive.
// It returns "" for anything else.
func DetectCheckpointFormat(r io.ReaderAt, size int64) CheckpointFormat {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return ""
	}
	var format CheckpointFormat
	for _, f := range zr.File {
		parts := strings.Split(f.Name, "/")
		switch {
		case len(parts) >= 3 && parts[0] == "data" && parts[1] == "aotinductor",
			len(parts) >= 4 && parts[1] == "data" && parts[2] == "aotinductor":
			return FormatAOTInductor
		case len(parts) == 2 && parts[1] == "data.pkl":
			format = FormatTorchScript
		}
	}
	return format
}

// CheckpointFormatOf opens path and recognises its format
// (DetectCheckpointFormat); "" when it is neither format.
func CheckpointFormatOf(path string) (CheckpointFormat, error) {
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
	return DetectCheckpointFormat(f, st.Size()), nil
}

// ResolveCheckpointFormat returns the format a checkpoint file is run as:
// declared when it is not "" (the manifest wins), else the format
// recognised from the file, else TorchScript. A file recognised as the
// other format than the one declared is an error naming both.
func ResolveCheckpointFormat(path string, declared CheckpointFormat) (CheckpointFormat, error) {
	if declared != "" && !declared.Valid() {
		return "", fmt.Errorf("checkpoint format %q: want torchscript or aotinductor", declared)
	}
	found, err := CheckpointFormatOf(path)
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
	return FormatTorchScript, nil
}

// Describe names the format in a sentence: "a TorchScript archive", "an
// AOTInductor package".
func (f CheckpointFormat) Describe() string {
	switch f {
	case FormatTorchScript:
		return "a TorchScript archive"
	case FormatAOTInductor:
		return "an AOTInductor package"
	}
	return fmt.Sprintf("format %q", string(f))
}
