package oippb

import "google.golang.org/grpc/metadata"

// MetadataCarrier carries a trace context (OpenTelemetry's
// propagation.TextMapCarrier) in gRPC metadata, under lower-case keys as
// gRPC requires (propagation.HeaderCarrier's canonical "Traceparent" is
// refused by the transport). The client injects into it, the server
// extracts from it.
type MetadataCarrier metadata.MD

// Get returns the first value of key.
func (c MetadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces key's values with value.
func (c MetadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

// Keys lists the keys present.
func (c MetadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
