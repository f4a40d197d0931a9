//go:build torch

package main

import (
	_ "github.com/worldfoundry/wfgen/runtime/torch" // registers the libtorch engine

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Built with -tags torch, wfgen links the libtorch engine for wfgen import
// --example, which runs the model.
func init() { importEngine = engine.DefaultEngine }
