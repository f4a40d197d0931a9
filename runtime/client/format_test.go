package client_test

import (
	"errors"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
)

// A client gives a checkpoint to the registered engine that reads its
// format — libtorch when it does (it is the default), another registered
// engine otherwise — and an engine chosen with WithEngine that does not
// read it is refused, naming what it reads.
func TestClientPicksTheEngineThatReadsTheFormat(t *testing.T) {
	lt, err := engine.Lookup(engine.DefaultName)
	if err != nil {
		t.Skipf("libtorch is not registered (%v): registering another engine would make it the default of this test binary", err)
	}
	errLoad := errors.New("the pt2 reader was asked")
	reader := &enginetest.Engine{Label: "pt2-reader", Reads: []wfspec.CheckpointFormat{wfspec.FormatAOTInductor}, LoadErr: errLoad}
	engine.Register("pt2-reader", reader)
	pkg := enginetest.ZipFile(t, "model.pt2", "version", "data/aotinductor/model/x.so") // a package, as engine.DetectFormat tells
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointPath(pkg), client.WithoutCheckpointVerification(), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Load()
	if engine.Reads(lt, wfspec.FormatAOTInductor) {
		if err == nil || errors.Is(err, errLoad) || len(reader.Loads()) != 0 {
			t.Fatalf("libtorch reads packages and is the default, but: %v (pt2-reader loads %v)", err, reader.Loads())
		}
	} else if !errors.Is(err, errLoad) || len(reader.Loads()) != 1 || reader.Loads()[0].Options.Format != wfspec.FormatAOTInductor {
		t.Fatalf("libtorch %s reads no package: want the pt2 reader asked for aotinductor, got %v (loads %v)", lt.Version(), err, reader.Loads())
	}

	tsOnly := &enginetest.Engine{Label: "scripted", Release: "9", Reads: []wfspec.CheckpointFormat{wfspec.FormatTorchScript}}
	c2, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointPath(pkg), client.WithoutCheckpointVerification(), client.WithEngine(tsOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, _, err = c2.Load()
	var ferr *engine.FormatError
	want := "tiny-encoder/default: checkpoint: " + pkg + ": no engine reads an AOTInductor package (format aotinductor): scripted 9 reads torchscript"
	if !errors.Is(err, client.ErrCheckpoint) || !errors.As(err, &ferr) || err.Error() != want || len(tsOnly.Loads()) != 0 {
		t.Fatalf("an engine chosen that reads no package:\n got %v\nwant %s", err, want)
	}
}
