// Package tinymodels builds the bundled tiny TorchScript checkpoints of the
// runnable families in manifests/ (tiny-encoder and tiny-world) from
// TorchScript source, with deterministic weights: nothing is downloaded.
// The demo and the end-to-end tests use it.
package tinymodels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// Encoder sizes: token ids are taken modulo EncoderVocab; embeddings have
// EncoderDim floats.
const (
	EncoderVocab = 1000
	EncoderDim   = 64
)

// EncoderSource is the tiny-encoder's TorchScript: mean-pooled token
// embeddings, a tanh projection and optional L2 normalisation. tokens is
// int64 [L] or, batched, [N, L].
const EncoderSource = `
def forward(self, tokens: Tensor, normalize: bool = True) -> Tensor:
    e = torch.embedding(self.table, tokens.remainder(self.table.size(0)))
    v = torch.tanh(torch.matmul(e.mean(dim=-2), self.proj))
    if normalize:
        v = v / v.norm(2, [-1], True).clamp_min(1e-6)
    return v
`

// WorldSource is the tiny-world's TorchScript: forward renders a clip whose
// colours depend on the prompt and seed; step renders the next chunk of a
// session, moved by the controls [forward, backward, left, right] and
// carrying (x, y, t) in its state.
const WorldSource = `
def render(self, num_frames: int, height: int, width: int, phase: float, dx: float, dy: float, t0: float) -> Tensor:
    t = torch.arange(num_frames).float().view(-1, 1, 1, 1) + t0
    y = torch.arange(height).float().view(1, -1, 1, 1) + dy
    x = torch.arange(width).float().view(1, 1, -1, 1) + dx
    c = torch.arange(3).float().view(1, 1, 1, -1)
    v = torch.sin(x * self.freq[0] + y * self.freq[1] + t * self.freq[2] + c * 2.0 + phase)
    return ((v + 1.0) * 127.5).clamp(0.0, 255.0).byte()

def forward(self, prompt: str, seed: int = 0, num_frames: int = 9, height: int = 32, width: int = 32) -> Tensor:
    h = seed % 1000003
    for ch in prompt:
        h = (h * 31 + ord(ch)) % 1000003
    return self.render(num_frames, height, width, float(h % 628) / 100.0, 0.0, 0.0, 0.0)

def step(self, num_frames: int, controls: List[float], speed: float = 2.0, state: Optional[Tensor] = None) -> Dict[str, Tensor]:
    s = torch.zeros(3)
    if state is not None:
        s = state.clone()
    s[1] = s[1] - speed * (controls[0] - controls[1])
    s[0] = s[0] + speed * (controls[3] - controls[2])
    frames = self.render(num_frames, 32, 32, 0.0, float(s[0]), float(s[1]), float(s[2]))
    s[2] = s[2] + float(num_frames)
    return {"frames": frames, "state": s}
`

// StepsSource is a session-batched world (session_batching; the
// manifest runtime/serve/testdata/steps-world.yaml): each session's state is its
// position (float32 [2]), moved by its controls; its frames [T, 2, 2, 3]
// show the position, the frame index and the size of the batch the call
// ran at, so that a session's frames depend on the company it kept unless
// every call runs at one size (the invariant padding: the probe finds no
// size but the max giving the max's bits). A control beyond ±100 fails the
// call (the runtime then finds the session that sent it).
const StepsSource = `
def steps(self, num_frames: int, controls: Tensor, start: Optional[Tensor] = None, state: Optional[Tensor] = None) -> Dict[str, Tensor]:
    assert not bool((controls.abs() > 100.0).any()), "controls: want values within [-100, 100]"
    n = controls.size(0)
    s = torch.zeros(n, 2)
    if state is not None:
        s = state.clone()
    elif start is not None:
        s = start.clone()
    s[:, 0] = s[:, 0] + controls[:, 3] - controls[:, 2]
    s[:, 1] = s[:, 1] + controls[:, 1] - controls[:, 0]
    t = torch.arange(num_frames).float().view(1, -1, 1, 1, 1)
    v = s.view(n, 1, 1, 1, 2).expand(n, num_frames, 2, 2, 2)
    f = torch.cat([v * 7.0 + t, torch.full([n, num_frames, 2, 2, 1], float(n))], 4)
    return {"frames": f.remainder(256.0).byte(), "state": s}
`

// StepsControls is scripted player p's controls before chunk i of the
// session-batched world: an arrow each chunk, none every third.
func StepsControls(p, i int) stream.Controls {
	names := []string{"up", "down", "left", "right"}
	if (i+p)%3 == 0 {
		return stream.Controls{}
	}
	return stream.Controls{names[(p+i)%4]: 1}
}

// Streamer starts sessions with untyped call kwargs: runtime/client's and
// runtime/remote's Client.
type Streamer interface {
	Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error)
}

// PlaySteps plays n chunks of a session of the session-batched world's
// "play" task on b, unpaced, as scripted player p (StepsControls set
// before each chunk), and returns the frames, chunk after chunk.
func PlaySteps(ctx context.Context, b Streamer, p, n int) ([]byte, error) {
	sess, err := b.Stream(ctx, "play", nil, stream.WithPacing(false), stream.WithMaxChunks(n))
	if err != nil {
		return nil, err
	}
	var out []byte
	for i := range n {
		if err := sess.SetControls(StepsControls(p, i)); err != nil {
			return nil, err
		}
		got := false
		for c, err := range sess.Chunks(ctx) {
			if err != nil {
				return nil, fmt.Errorf("player %d chunk %d: %w", p, i, err)
			}
			out = append(out, c.Video.Frames.Data...)
			got = true
			break
		}
		if !got {
			return nil, fmt.Errorf("player %d: the session ended after %d chunks", p, i)
		}
	}
	return out, nil
}

// BuildSteps writes the session-batched world's checkpoint to path.
func BuildSteps(path string) error {
	return BuildSource(path, torch.ModuleSource{Source: StepsSource})
}

// AttentionSource is a one-layer attention-pooling text encoder (token
// embeddings, two heads of self-attention, mean pooling, L2 norm): tokens
// int64 [N, L] to float32 [N, 128]. It is the smallest model here whose
// batch of one takes another kernel path than larger batches (the
// attention's batched matmul) on some CPUs, as a BERT-sized encoder does,
// so its answers differ in the last bits with the batch size there (on an
// AVX-512 AMD EPYC they do not: SizeSensitiveSource differs everywhere).
const AttentionSource = `
def forward(self, tokens: Tensor) -> Tensor:
    n = tokens.size(0)
    l = tokens.size(1)
    x = torch.embedding(self.table, tokens.remainder(self.table.size(0)))
    q = x.view(n, l, 2, 64).transpose(1, 2)
    a = torch.softmax(torch.matmul(q, q.transpose(-1, -2)) * 0.125, -1)
    c = torch.matmul(a, q).transpose(1, 2).reshape(n, l, 128)
    v = c.mean(dim=1)
    return v / v.norm(2, [-1], True).clamp_min(1e-6)
`

// BuildAttention writes the attention encoder's checkpoint to path.
func BuildAttention(path string) error {
	return BuildSource(path, torch.ModuleSource{Source: AttentionSource,
		Parameters: map[string]*tensor.Tensor{"table": attentionTable()}})
}

// attentionTable is the attention encoder's token embeddings.
func attentionTable() *tensor.Tensor {
	r := rand.New(rand.NewPCG(5, 6))
	v := make([]float32, 1000*128)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return tensor.FromFloat32(v, 1000, 128)
}

// SizeSensitiveSource is the attention encoder with one change: its pooled
// vector moves by 5e-8 times the batch size before the norm, so an item's
// output differs in its last bits between any two batch sizes on every CPU.
// The attention encoder's own kernels do that on some CPUs and not on
// others (docs/batching.md); tests of batch invariance use this model so
// that what they check can fail on any machine.
var SizeSensitiveSource = strings.Replace(AttentionSource, "v = c.mean(dim=1)\n", "v = c.mean(dim=1) + 5e-8 * float(n)\n", 1)

// BuildSizeSensitive writes the size-sensitive encoder's checkpoint (the
// attention encoder's weights) to path.
func BuildSizeSensitive(path string) error {
	return buildVariant(path, SizeSensitiveSource)
}

// AttentionArgmaxSource is the attention encoder answering the index of
// its largest feature (int64 [N]) in place of the features: an output of
// integers, which hides the last bits that batch sizes change (docs/batching.md,
// "The equivalent sizes").
var AttentionArgmaxSource = strings.Replace(AttentionSource, "return v / v.norm(2, [-1], True).clamp_min(1e-6)\n", "return (v / v.norm(2, [-1], True).clamp_min(1e-6)).argmax(-1)\n", 1)

// AttentionArgmaxScoresSource is the argmax encoder returning, beside its
// answer ("out"), the features it chose from ("scores", float32 [N, 128])
// in a dict: a tensor a task need not declare, which the measurement of
// equivalent batch sizes compares.
var AttentionArgmaxScoresSource = strings.NewReplacer(
	"def forward(self, tokens: Tensor) -> Tensor:\n", "def forward(self, tokens: Tensor) -> Dict[str, Tensor]:\n",
	"return v / v.norm(2, [-1], True).clamp_min(1e-6)\n", "e = v / v.norm(2, [-1], True).clamp_min(1e-6)\n    return {\"out\": e.argmax(-1), \"scores\": e}\n",
).Replace(AttentionSource)

// BuildAttentionArgmax writes the argmax encoder's checkpoint (the
// attention encoder's weights) to path.
func BuildAttentionArgmax(path string) error {
	return buildVariant(path, AttentionArgmaxSource)
}

// BuildAttentionArgmaxScores writes the argmax encoder with its scores
// (the attention encoder's weights) to path.
func BuildAttentionArgmaxScores(path string) error {
	return buildVariant(path, AttentionArgmaxScoresSource)
}

// buildVariant writes a variant of the attention encoder's source with its
// weights to path.
func buildVariant(path, source string) error {
	if source == AttentionSource {
		return fmt.Errorf("tinymodels: the attention source changed; the variant adds nothing")
	}
	return BuildSource(path, torch.ModuleSource{Source: source,
		Parameters: map[string]*tensor.Tensor{"table": attentionTable()}})
}

// Files are the checkpoint file names Build writes, relative to its folder,
// as the manifests' checkpoint URIs give them.
var Files = map[string]string{
	"tiny-encoder": "checkpoints/tiny-encoder.pt",
	"tiny-world":   "checkpoints/tiny-world.pt",
}

// Build writes both checkpoints under dir (dir/checkpoints/...), replacing
// existing files atomically.
func Build(dir string) error {
	if err := BuildEncoder(filepath.Join(dir, Files["tiny-encoder"])); err != nil {
		return err
	}
	return BuildWorld(filepath.Join(dir, Files["tiny-world"]))
}

// BuildEncoder writes the tiny-encoder checkpoint to path.
func BuildEncoder(path string) error {
	r := rand.New(rand.NewPCG(1, 2))
	return BuildSource(path, torch.ModuleSource{
		Source: EncoderSource,
		Parameters: map[string]*tensor.Tensor{
			"table": randn(r, EncoderVocab, EncoderDim),
			"proj":  randn(r, EncoderDim, EncoderDim),
		},
	})
}

// BuildWorld writes the tiny-world checkpoint to path.
func BuildWorld(path string) error {
	return BuildSource(path, torch.ModuleSource{
		Source:     WorldSource,
		Parameters: map[string]*tensor.Tensor{"freq": tensor.FromFloat32([]float32{0.21, 0.17, 0.5}, 3)},
	})
}

// BuildSource compiles src and writes the TorchScript checkpoint to path,
// creating its folder; an existing file is replaced atomically, and a
// failed build leaves nothing behind.
func BuildSource(path string, src torch.ModuleSource) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := torch.BuildModule(src, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

func randn(r *rand.Rand, shape ...int64) *tensor.Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * 0.5
	}
	return tensor.FromFloat32(v, shape...)
}
