//go:build torch

package main

import (
	"github.com/worldfoundry/wfgen/runtime"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // registers the libtorch engine
)

// Built with -tags torch, wfgen links the libtorch engine for wfgen import
// --example, which runs the model.
func init() { importEngine = runtime.DefaultEngine }
