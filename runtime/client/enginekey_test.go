package client_test

import (
	"context"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// Two clients of one checkpoint over different engines each get a module
// of their own engine: the module cache is keyed by the engine too (a
// client made WithEngine got the module another engine had loaded).
func TestModuleCacheIsPerEngine(t *testing.T) {
	dir := tiny.Dir(t)
	ctx := context.Background()
	var engines [2]*enginetest.Engine
	for i := range engines {
		engines[i] = enginetest.OverDefault(t)
		c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(dir), client.WithDevice("cpu"), client.WithEngine(engines[i]))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Run(ctx, "embed", map[string]any{"tokens": tokens(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range engines {
		if len(e.Loads()) != 1 || len(e.Calls()) != 1 {
			t.Errorf("engine %d: %d loads and %d calls, want its own load and call", i, len(e.Loads()), len(e.Calls()))
		}
	}
}
