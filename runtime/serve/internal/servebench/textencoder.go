package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Text-encoder sizes: those of BERT-tiny (2 layers, hidden 128, 2 heads
// of 64, feed-forward 512, a 30,522-token vocabulary, 512 positions), the
// smallest of the compact BERT models that sentence-embedding services
// run. Token ids are taken modulo textVocab.
const (
	textVocab     = 30522
	textPositions = 512
	textHidden    = 128
	textFFN       = 512
	textLayers    = 2
)

// textEncoderSource is the text encoder's TorchScript: a BERT-style
// encoder (token and position embeddings, post-norm self-attention and
// GELU feed-forward layers) whose token states are mean-pooled and L2
// normalised. tokens is int64 [L] or, batched, [N, L]; the embedding is
// float32 [128] or [N, 128].
const textEncoderSource = `
def layer(self, x: Tensor, qkv_w: Tensor, qkv_b: Tensor, o_w: Tensor, o_b: Tensor, ln1_w: Tensor, ln1_b: Tensor,
          f1_w: Tensor, f1_b: Tensor, f2_w: Tensor, f2_b: Tensor, ln2_w: Tensor, ln2_b: Tensor) -> Tensor:
    n = x.size(0)
    l = x.size(1)
    flat = x.reshape(n * l, 128)
    qkv = torch.addmm(qkv_b, flat, qkv_w).view(n, l, 3, 2, 64).permute(2, 0, 3, 1, 4)
    a = torch.softmax(torch.matmul(qkv[0], qkv[1].transpose(-1, -2)) * 0.125, -1)
    c = torch.matmul(a, qkv[2]).transpose(1, 2).reshape(n * l, 128)
    x = torch.layer_norm(x + torch.addmm(o_b, c, o_w).view(n, l, 128), [128], ln1_w, ln1_b, 1e-12)
    h = torch.gelu(torch.addmm(f1_b, x.reshape(n * l, 128), f1_w))
    return torch.layer_norm(x + torch.addmm(f2_b, h, f2_w).view(n, l, 128), [128], ln2_w, ln2_b, 1e-12)

def forward(self, tokens: Tensor) -> Tensor:
    single = tokens.dim() == 1
    if single:
        tokens = tokens.unsqueeze(0)
    l = tokens.size(1)
    x = torch.embedding(self.word, tokens.remainder(self.word.size(0))) + self.pos[:l].unsqueeze(0)
    x = torch.layer_norm(x, [128], self.ln0_w, self.ln0_b, 1e-12)
    x = self.layer(x, self.l0_qkv_w, self.l0_qkv_b, self.l0_o_w, self.l0_o_b, self.l0_ln1_w, self.l0_ln1_b,
                   self.l0_f1_w, self.l0_f1_b, self.l0_f2_w, self.l0_f2_b, self.l0_ln2_w, self.l0_ln2_b)
    x = self.layer(x, self.l1_qkv_w, self.l1_qkv_b, self.l1_o_w, self.l1_o_b, self.l1_ln1_w, self.l1_ln1_b,
                   self.l1_f1_w, self.l1_f1_b, self.l1_f2_w, self.l1_f2_b, self.l1_ln2_w, self.l1_ln2_b)
    v = x.mean(dim=1)
    v = v / v.norm(2, [-1], True).clamp_min(1e-6)
    if single:
        v = v.squeeze(0)
    return v
`

// buildTextEncoder writes the text-encoder checkpoint to path, with
// deterministic weights scaled as a trained BERT's are (about 0.02 for
// projections, unit layer-norm gains).
func buildTextEncoder(path string) error {
	r := rand.New(rand.NewPCG(3, 4))
	p := map[string]*tensor.Tensor{
		"word":  randn(r, 1.0, textVocab, textHidden),
		"pos":   randn(r, 0.1, textPositions, textHidden),
		"ln0_w": ones(textHidden),
		"ln0_b": zeros(textHidden),
	}
	for i := range textLayers {
		l := fmt.Sprintf("l%d_", i)
		p[l+"qkv_w"] = randn(r, 0.05, textHidden, 3*textHidden)
		p[l+"qkv_b"] = zeros(3 * textHidden)
		p[l+"o_w"] = randn(r, 0.05, textHidden, textHidden)
		p[l+"o_b"] = zeros(textHidden)
		p[l+"ln1_w"] = ones(textHidden)
		p[l+"ln1_b"] = zeros(textHidden)
		p[l+"f1_w"] = randn(r, 0.05, textHidden, textFFN)
		p[l+"f1_b"] = zeros(textFFN)
		p[l+"f2_w"] = randn(r, 0.05, textFFN, textHidden)
		p[l+"f2_b"] = zeros(textHidden)
		p[l+"ln2_w"] = ones(textHidden)
		p[l+"ln2_b"] = zeros(textHidden)
	}
	return tinymodels.BuildSource(path, torch.ModuleSource{Source: textEncoderSource, Parameters: p})
}

func randn(r *rand.Rand, scale float64, shape ...int64) *tensor.Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return tensor.FromFloat32(v, shape...)
}

func ones(n int64) *tensor.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return tensor.FromFloat32(v, n)
}

func zeros(n int64) *tensor.Tensor { return tensor.FromFloat32(make([]float32, n), n) }
