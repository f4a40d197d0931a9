// Package zoo holds the zoo test (issue 42 §5): torchvision 0.14 models with
// random weights, scripted by zoo.py, each run through wfgen import →
// validate → generate with no manual edit, loaded by one cgo-built program
// through its generated package's in-process client and called through
// wfserve (REST JSON, REST binary, gRPC) with its remote client, and
// compared with PyTorch's outputs bit for bit (one thread on both sides).
//
// go test runs a fast subset; WFGEN_ZOO=all runs every model,
// WFGEN_ZOO=NAME,NAME the ones named, and
// WFGEN_ZOO_TABLE=FILE writes the results as a Markdown table (make zoo
// writes docs/zoo.md).
package zoo
