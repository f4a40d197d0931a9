// Package generated holds the typed Go packages wfgen generates from the
// built-in manifests in manifests/, one folder per model family. They are
// checked in like .pb.go files; a test fails when they are stale.
//
// Regenerate them with "make generate" or "go generate ./generated", which
// run the same command from the repository root (so the headers name
// manifests/...):
//
//	go run ./cmd/wfgen generate -o generated --clean manifests/
package generated

//go:generate sh -c "cd .. && go run ./cmd/wfgen generate -o generated --clean manifests/"
