//go:build cgo

package client_test

import (
	"context"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
)

// BenchmarkEmbedOne is one call of the generated tiny-encoder client's
// Embed, typed params in and a typed result out — what a server does per
// unbatched request: the client's own cost per call over the engine's (see
// BenchmarkCall in runtime/torch for the engine alone).
func BenchmarkEmbedOne(b *testing.B) {
	c := newTinyEncoder(b)
	p := tinyencoder.DefaultEmbedParams()
	p.Tokens = tokens(1)
	ctx := context.Background()
	if _, err := c.Embed(ctx, p); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Embed(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
