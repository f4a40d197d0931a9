package remote

// The gRPC transport: a Client made for a grpc:// or grpcs:// URL calls the
// protocol's gRPC API (ModelInfer, ModelMetadata, ModelReady) and runs
// realtime sessions on wfgen's bidirectional RPC (ModelStreamInfer), with
// the same requests, answers and errors as over REST: the inputs travel
// raw (raw_input_contents), the outputs come back raw, and a refusal is a
// *StatusError with the REST status its gRPC code stands for.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// maxGRPCMessage bounds one answer (or chunk) a gRPC client takes.
const maxGRPCMessage = maxEventBytes

// grpcTransport is a Client's gRPC connection and the services' clients.
type grpcTransport struct {
	conn *grpc.ClientConn
	oip  oippb.GRPCInferenceServiceClient
	rt   oippb.RealtimeInferenceServiceClient
}

// WithTLSConfig sets the TLS configuration of a grpcs:// client's
// connection (its roots, client certificates...; default: the system's
// roots). An https:// client takes its TLS from WithHTTPClient.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) error {
		if cfg == nil {
			return errors.New("remote: nil TLS config")
		}
		c.tlsCfg = cfg
		return nil
	}
}

// dialGRPC returns the transport of a grpc:// (plaintext, HTTP/2 without
// TLS) or grpcs:// (TLS: cfg, else the system's roots) URL; nothing is
// sent until the first call.
func dialGRPC(u *url.URL, cfg *tls.Config) (*grpcTransport, error) {
	creds := insecure.NewCredentials()
	if u.Scheme == "grpcs" {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage)))
	if err != nil {
		return nil, err
	}
	return &grpcTransport{conn: conn, oip: oippb.NewGRPCInferenceServiceClient(conn), rt: oippb.NewRealtimeInferenceServiceClient(conn)}, nil
}

// grpcContext is ctx with the call's metadata: the bearer token and the
// trace context of the caller's span.
func (c *Client) grpcContext(ctx context.Context) context.Context {
	md := metadata.MD{}
	traceContext.Inject(ctx, oippb.MetadataCarrier(md))
	if c.token != "" {
		md.Set("authorization", "Bearer "+c.token)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// grpcError is the error of a failed call: ctx's own when it ended, else
// a *StatusError with the REST status the call's gRPC code stands for
// (so that errors.Is matches context.DeadlineExceeded and
// spec.ErrUnknownID as over REST), or the transport's error.
func grpcError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, ok := grpcstatus.FromError(err)
	if !ok {
		return err
	}
	return &StatusError{Status: oippb.HTTPStatus(st.Code()), Message: st.Message()}
}

// retryable reports whether a gRPC call that failed with err may be sent
// again under WithRetries: no answer from a model (Unavailable: the
// connection failed or the server drains) or a full server
// (ResourceExhausted, as 429).
func retryable(err error) bool {
	switch grpcstatus.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

// grpcCall runs one unary call with the client's metadata, span and
// retries.
func grpcCall[T any](ctx context.Context, c *Client, method string, call func(context.Context) (T, error)) (out T, err error) {
	t := c.tracer
	if t == nil {
		t = globalTracer
	}
	ctx, span := t.Start(ctx, "inference.GRPCInferenceService/"+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", method),
			attribute.String("wfserve.model", c.spec.ModelFamilyID)))
	defer func() { endSpan(span, err) }()
	cctx := c.grpcContext(ctx)
	for attempt := 0; ; attempt++ {
		out, err = call(cctx)
		if err == nil {
			return out, nil
		}
		if attempt >= c.retries || !retryable(err) || !sleep(ctx, backoff(attempt)) {
			return out, grpcError(ctx, err)
		}
	}
}

// sleep waits d, or less when ctx ends first (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// grpcInfer sends an infer request (its inputs raw) with ModelInfer.
func (c *Client) grpcInfer(ctx context.Context, req *oip.InferenceRequest) (*oip.InferenceResponse, error) {
	m, err := oippb.NewRequest(c.model, c.variant, req)
	if err != nil {
		return nil, err
	}
	resp, err := grpcCall(ctx, c, "ModelInfer", func(ctx context.Context) (*oippb.ModelInferResponse, error) {
		return c.grpc.oip.ModelInfer(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	out, err := oippb.DecodeResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("malformed answer: %w", err)
	}
	return out, nil
}

// rawRequest builds the infer request of a task with every input raw, as
// gRPC carries them.
func rawRequest(task *spec.InferenceTaskProfile, call, load map[string]any) (*oip.InferenceRequest, error) {
	inputs, err := oip.EncodeInputsRaw(task, call, load)
	if err != nil {
		return nil, err
	}
	if inputs == nil {
		inputs = []oip.Tensor{}
	}
	return &oip.InferenceRequest{Inputs: inputs, Parameters: oip.Parameters{"task": task.TaskID}}, nil
}

// infer sends an infer request over the client's transport: ModelInfer on
// gRPC, POST .../infer on REST.
func (c *Client) infer(ctx context.Context, req *oip.InferenceRequest) (*oip.InferenceResponse, error) {
	if c.grpc != nil {
		return c.grpcInfer(ctx, req)
	}
	var resp oip.InferenceResponse
	if err := c.do(ctx, "POST", c.path("infer"), req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// grpcMetadata answers Metadata over gRPC: the REST metadata's fields,
// its parameters from the property "parameters".
func (c *Client) grpcMetadata(ctx context.Context) (*oip.ModelMetadata, error) {
	md, err := grpcCall(ctx, c, "ModelMetadata", func(ctx context.Context) (*oippb.ModelMetadataResponse, error) {
		return c.grpc.oip.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: c.model, Version: c.variant})
	})
	if err != nil {
		return nil, err
	}
	out := &oip.ModelMetadata{Name: md.GetName(), Versions: md.GetVersions(), Platform: md.GetPlatform()}
	tensors := func(ts []*oippb.ModelMetadataResponse_TensorMetadata) []oip.TensorMetadata {
		list := make([]oip.TensorMetadata, len(ts))
		for i, t := range ts {
			list[i] = oip.TensorMetadata{Name: t.GetName(), Datatype: oip.Datatype(t.GetDatatype()), Shape: t.GetShape()}
		}
		return list
	}
	out.Inputs, out.Outputs = tensors(md.GetInputs()), tensors(md.GetOutputs())
	if p := md.GetProperties()["parameters"]; p != "" {
		if err := out.Parameters.UnmarshalJSON([]byte(p)); err != nil {
			return nil, fmt.Errorf("malformed metadata parameters: %w", err)
		}
	}
	return out, nil
}

// grpcReady answers Ready over gRPC.
func (c *Client) grpcReady(ctx context.Context) error {
	r, err := grpcCall(ctx, c, "ModelReady", func(ctx context.Context) (*oippb.ModelReadyResponse, error) {
		return c.grpc.oip.ModelReady(ctx, &oippb.ModelReadyRequest{Name: c.model, Version: c.variant})
	})
	if err != nil {
		return err
	}
	if !r.GetReady() {
		return &StatusError{Status: 503, Message: "the model is not ready"}
	}
	return nil
}

// errNotGRPC refuses options that only apply to REST on a gRPC client.
var errNotGRPC = errors.New("remote: WithHTTPClient and WithJSONTensors apply to http:// and https:// URLs, not grpc://")

// errNotTLS refuses WithTLSConfig on a URL other than grpcs://.
var errNotTLS = errors.New("remote: WithTLSConfig applies to grpcs:// URLs (an https:// client takes its TLS from WithHTTPClient)")
