// Package oippb holds the Open Inference Protocol's gRPC API, generated
// from the protocol's own open_inference_grpc.proto (copied unchanged from
// github.com/kserve/open-inference-protocol, specification/protocol, at
// commit d49cc23; Apache License 2.0, its header kept), and wfgen's
// realtime session RPC (wfgen_realtime.proto), which the protocol lacks.
//
// The .pb.go files are generated and committed; regenerate them with go
// generate in this folder (protoc from Debian's protobuf-compiler and the
// protoc-gen-go and protoc-gen-go-grpc that go.mod pins as tools).
// TestGeneratedFilesAreCurrent fails when they differ from what the .proto
// files give.
package oippb

//go:generate go run ./internal/protogen
