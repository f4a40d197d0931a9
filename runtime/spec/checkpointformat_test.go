package spec

import (
	"strings"
	"testing"
)

func TestFormatProblems(t *testing.T) {
	cases := []struct {
		uri    string
		format CheckpointFormat
		want   string
	}{
		{"m.pt2", "", ""},
		{"m.pt2", FormatAOTInductor, ""},
		{"m.pt", FormatTorchScript, ""},
		{"hf://org/model", FormatAOTInductor, ""},
		{"m.bin", FormatTorchScript, ""},
		{"checkpoints/M.PT2", FormatTorchScript, `format torchscript, but the uri "checkpoints/M.PT2" ends in .pt2, the extension of an AOTInductor package`},
		{"m.pt", FormatAOTInductor, `format aotinductor, but the uri "m.pt" ends in .pt, the extension of a TorchScript archive`},
		{"m.pt", "onnx", `format "onnx" is not torchscript or aotinductor`},
	}
	for _, c := range cases {
		ref := InferenceCheckpointRef{Role: "model", URI: c.uri, Format: c.format}
		ps := ref.FormatProblems()
		got := JoinProblems(ps)
		if c.want == "" && len(ps) != 0 || c.want != "" && (len(ps) != 1 || ps[0].Path != "format" || !strings.Contains(got, c.want)) {
			t.Errorf("%s %q: got %q, want %q", c.uri, c.format, got, c.want)
		}
	}
}
