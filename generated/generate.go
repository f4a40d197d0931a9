// Package generated holds the typed Go packages wfgen generates from the
// built-in manifests in manifests/, one folder per model family, and the
// package all, which imports every one of them (so that a program finds
// every built-in family through spec.DefaultRegistry). They are checked
// in like .pb.go files; a test fails when they are stale.
//
// Regenerate them with "make generate" or "go generate ./generated", which
// both run wfgen with the inputs and output folder of the repository's
// wfgen.yaml:
//
//	go run ./cmd/wfgen generate --clean
package generated

//go:generate go run github.com/worldfoundry/wfgen/cmd/wfgen generate --clean
