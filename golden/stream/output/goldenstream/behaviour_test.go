package goldenstream

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration).

import (
	"context"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

func TestStreamingAndBatchingSpec(t *testing.T) {
	s := Spec()
	play, err := s.Task(string(TaskPlay))
	if err != nil || !play.Stream || play.MethodName() != "step" {
		t.Fatalf("play task: %+v, %v", play, err)
	}
	enc, _ := s.Task(string(TaskEncode))
	if enc.Batching == nil || enc.Batching.MaxBatchSize != 8 {
		t.Errorf("encode batching: %+v", enc.Batching)
	}
	if !s.SupportsStream || s.Realtime == nil || s.Realtime.FPS != 12 || s.Realtime.FirstChunkFrames != 5 {
		t.Errorf("realtime: %+v", s.Realtime)
	}
	if s.Deprecated == "" {
		t.Error("family deprecation lost")
	}
}

func TestStreamingTaskRunsOnceUntilWired(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Play(context.Background(), DefaultPlayParams())
	if res != nil || err == nil {
		t.Fatalf("Play = %v, %v; want an error and no result", res, err)
	}
	if _, engineErr := engine.DefaultEngine(); engineErr != nil && !strings.Contains(err.Error(), "no execution engine") {
		t.Errorf("Play error %q does not say that no engine is linked", err)
	}
	if _, err := c.Encode(context.Background(), EncodeParams{}); err == nil || !strings.Contains(err.Error(), "frame: is required") {
		t.Errorf("Encode without a frame: %v", err)
	}
}
