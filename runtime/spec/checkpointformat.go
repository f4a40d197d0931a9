package spec

import (
	"fmt"
	"path"
	"strings"
)

// CheckpointFormat says how a checkpoint file is run: what a manifest
// declares (InferenceCheckpointRef.Format). The engines say which formats
// they read, and runtime/engine recognises a file's format and picks the
// engine for it (engine.ResolveFormat, engine.ForFormat).
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
