package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestTextEncoder checks the bench's text encoder as wfserve runs it: its
// manifest validates, and through the in-process client a batch of
// sequences gives each item the embedding it gets alone, unit-length and
// different per sequence.
func TestTextEncoder(t *testing.T) {
	f, diags, err := validate.File("text-encoder.yaml")
	if err != nil || len(diags) > 0 {
		t.Fatalf("text-encoder.yaml: %v %v", err, diags)
	}
	dir := t.TempDir()
	if err := buildTextEncoder(filepath.Join(dir, "checkpoints", "text-encoder.pt")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", "text-encoder.pt.tmp")); !os.IsNotExist(err) {
		t.Errorf("build left its temporary file: %v", err)
	}
	c, err := client.New(f.Spec, client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	items := make([]map[string]any, 5)
	for i := range items {
		tok := make([]int64, 16)
		for j := range tok {
			tok[j] = int64((i*16+j)*7919) % textVocab
		}
		items[i] = map[string]any{"tokens": tensor.FromInt64(tok, 16)}
	}
	batched, err := c.RunBatch(ctx, "embed", items)
	if err != nil {
		t.Fatal(err)
	}
	var first []float32
	for i, item := range items {
		alone, err := c.Run(ctx, "embed", item, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, b := embedding(t, alone), embedding(t, batched[i])
		if len(a) != textHidden || len(b) != textHidden {
			t.Fatalf("item %d: %d and %d floats, want %d", i, len(a), len(b), textHidden)
		}
		var norm float64
		for j := range a {
			if math.Abs(float64(a[j]-b[j])) > 1e-5 {
				t.Fatalf("item %d: embedding[%d] = %g batched, %g alone", i, j, b[j], a[j])
			}
			norm += float64(a[j]) * float64(a[j])
		}
		if math.Abs(norm-1) > 1e-4 {
			t.Errorf("item %d: squared norm %g, want 1", i, norm)
		}
		if i == 0 {
			first = a
		} else if math.Abs(float64(a[0]-first[0])) < 1e-7 && math.Abs(float64(a[1]-first[1])) < 1e-7 {
			t.Errorf("item %d embeds like item 0", i)
		}
	}
}

func embedding(t *testing.T, out map[string]any) []float32 {
	t.Helper()
	e, ok := out["embedding"].(*tensor.Tensor)
	if !ok {
		t.Fatalf("outputs %v: no embedding tensor", out)
	}
	v, err := e.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
