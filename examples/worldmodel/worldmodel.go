// Package worldmodel trains the demo's learned world model
// (manifests/worldmodel.yaml) with Debian's python3-torch on frames of a
// small simulator of its own, plays it through the generated client, and
// measures it against the simulator.
//
// The simulator (sim.go, and the same in train.py) is a walled 32×32 room: a
// 4×4 sprite that the actions up, down, left and right move 2 pixels (none
// leaves it), and a 2×2 ball that moves diagonally by itself and bounces off
// the walls. The model predicts each next frame from the two before it and
// the action; its TorchScript step method is the manifest's streaming task,
// the two last frames its state between chunks, the realtime controls its
// action. train.py is embedded and run with /usr/bin/python3; the trained
// checkpoint is cached under a root folder (out/worldmodel for the demo)
// with a stamp of the script and torch, so a changed script retrains.
package worldmodel

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	gen "github.com/worldfoundry/wfgen/generated/worldmodel"
)

// Python is the interpreter with Debian's python3-torch (scripts/setup.sh
// installs it).
const Python = "/usr/bin/python3"

// Checkpoint is the checkpoint's path under a model root, as the
// manifest's checkpoint uri gives it.
const Checkpoint = "checkpoints/worldmodel.pt"

const (
	stampFile  = "train.stamp"
	reportFile = "train.json"
	lockFile   = "train.lock"
)

//go:embed train.py
var script []byte

// torchVersion is the file that names the installed torch build: a
// different build may train different weights.
const torchVersion = "/usr/lib/python3/dist-packages/torch/version.py"

// Report is what a training run printed.
type Report struct {
	// Seconds is the time training took (data, steps; not start-up).
	Seconds float64 `json:"seconds"`
	// Steps, Batch and Threads are the training settings.
	Steps   int `json:"steps"`
	Batch   int `json:"batch"`
	Threads int `json:"threads"`
	// Parameters counts the model's weights.
	Parameters int `json:"parameters"`
	// Loss is the last batch's cross-entropy.
	Loss float64 `json:"loss"`
	// PixelAccuracy and FrameAccuracy are the one-step results on 4,000
	// transitions not trained on: the fraction of pixels, and of whole
	// frames, predicted right.
	PixelAccuracy float64 `json:"pixel_accuracy"`
	FrameAccuracy float64 `json:"frame_accuracy"`
}

// Stamp identifies a training run's inputs: the script and the torch build.
// A root whose stamp matches needs no training.
func Stamp() string {
	h := sha256.New()
	h.Write(script)
	if v, err := os.ReadFile(torchVersion); err == nil {
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Ensure trains the model into root unless root already holds the
// checkpoint of the current script and torch; it returns the training
// report, or nil when the cached model was kept. Processes that call it at
// once on one root wait for each other: one trains, the others keep its
// result.
func Ensure(ctx context.Context, root string) (*Report, error) {
	if cached(root) {
		return nil, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(root, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if cached(root) {
		return nil, nil // trained by another process meanwhile
	}
	return Train(ctx, root)
}

func cached(root string) bool {
	b, err := os.ReadFile(filepath.Join(root, stampFile))
	if err != nil || strings.TrimSpace(string(b)) != Stamp() {
		return false
	}
	_, err = os.Stat(filepath.Join(root, Checkpoint))
	return err == nil
}

// CachedReport returns the report of the training run whose checkpoint
// root holds.
func CachedReport(root string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(root, reportFile))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(root, reportFile), err)
	}
	return &r, nil
}

// Train runs train.py: it writes root/checkpoints/worldmodel.pt and the
// report, and records the stamp Ensure checks.
func Train(ctx context.Context, root string) (*Report, error) {
	// The stamp goes first, so a failed run leaves no stale match behind.
	if err := os.Remove(filepath.Join(root, stampFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	out, err := runScript(ctx, "train", "--out", root)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("worldmodel: train.py printed %q: %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(root, reportFile), out, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, stampFile), []byte(Stamp()+"\n"), 0o644); err != nil {
		return nil, err
	}
	return &r, nil
}

// PythonEpisodes runs train.py's check command on eps (all of one length
// T): it returns what Python's simulator shows after each action and, when
// model is not "", what the TorchScript checkpoint's steps method makes of
// the same start frames and actions, one frame at a time in batches of
// SessionBatchSize episodes — the bits the runtime gives every session of
// the play task, whatever its company; each uint8 [len(eps), T, Size, Size, 3].
func PythonEpisodes(ctx context.Context, model string, eps []Episode) (sim, rollout []byte, err error) {
	tmp, err := os.MkdirTemp("", "wfgen-worldmodel-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	type episode struct {
		Sprite   [2]int   `json:"sprite"`
		Ball     [2]int   `json:"ball"`
		Velocity [2]int   `json:"velocity"`
		Actions  []Action `json:"actions"`
	}
	in := struct {
		Episodes []episode `json:"episodes"`
	}{}
	for _, e := range eps {
		if len(e.Actions) != len(eps[0].Actions) {
			return nil, nil, fmt.Errorf("worldmodel: episodes of %d and %d actions; train.py takes one length", len(eps[0].Actions), len(e.Actions))
		}
		s := e.Start
		in.Episodes = append(in.Episodes, episode{[2]int{s.Sprite.X, s.Sprite.Y}, [2]int{s.Ball.X, s.Ball.Y}, [2]int{s.Velocity.X, s.Velocity.Y}, e.Actions})
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, nil, err
	}
	epPath, simPath, rollPath := filepath.Join(tmp, "episodes.json"), filepath.Join(tmp, "sim.raw"), filepath.Join(tmp, "rollout.raw")
	if err := os.WriteFile(epPath, b, 0o644); err != nil {
		return nil, nil, err
	}
	args := []string{"check", "--episodes", epPath, "--sim", simPath}
	if model != "" {
		args = append(args, "--model", model, "--rollout", rollPath, "--batch", strconv.Itoa(SessionBatchSize()))
	}
	if _, err := runScript(ctx, args...); err != nil {
		return nil, nil, err
	}
	if sim, err = os.ReadFile(simPath); err != nil {
		return nil, nil, err
	}
	if model != "" {
		if rollout, err = os.ReadFile(rollPath); err != nil {
			return nil, nil, err
		}
	}
	return sim, rollout, nil
}

// SessionBatchSize is the play task's session_batching max_batch_size: the
// batch size whose bits every session gets (spec.SessionBatchingSpec).
func SessionBatchSize() int {
	t, err := gen.Spec().Task("play")
	if err != nil || t.SessionBatching == nil {
		return 1
	}
	return t.SessionBatching.MaxBatchSize
}

// runScript runs the embedded train.py with args and returns its standard
// output. The script runs from a file in a temporary folder (TorchScript
// reads the source of the module it compiles), and with PYTHONHASHSEED
// fixed so that TorchScript writes the same code every run.
func runScript(ctx context.Context, args ...string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "wfgen-worldmodel-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "train.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, Python, append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("worldmodel: %s train.py %s: %v\n%s\n(scripts/setup.sh installs python3-torch)",
			Python, args[0], err, lastLines(stderr.String(), 8))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
