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
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// grpcTransport is the transport of a grpc:// or grpcs:// URL: a
// Client's gRPC connection and the services' clients.
type grpcTransport struct {
	c    *Client
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

// dialGRPC returns the transport of c's grpc:// (plaintext, HTTP/2
// without TLS) or grpcs:// (TLS: WithTLSConfig, else the system's roots)
// URL; nothing is sent until the first call.
func dialGRPC(c *Client) (*grpcTransport, error) {
	creds := insecure.NewCredentials()
	if c.base.Scheme == "grpcs" {
		cfg := c.tlsCfg
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(c.base.Host, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage)))
	if err != nil {
		return nil, err
	}
	return &grpcTransport{c: c, conn: conn, oip: oippb.NewGRPCInferenceServiceClient(conn), rt: oippb.NewRealtimeInferenceServiceClient(conn)}, nil
}

// outgoing is ctx with the call's metadata: the bearer token and the
// trace context of the caller's span.
func (g *grpcTransport) outgoing(ctx context.Context) context.Context {
	md := metadata.MD{}
	traceContext.Inject(ctx, oippb.MetadataCarrier(md))
	if g.c.token != "" {
		md.Set("authorization", "Bearer "+g.c.token)
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
func grpcCall[T any](ctx context.Context, g *grpcTransport, method string, call func(context.Context) (T, error)) (out T, err error) {
	c := g.c
	ctx, span := c.tracer.Start(ctx, "inference.GRPCInferenceService/"+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", method),
			attribute.String("wfserve.model", c.spec.ModelFamilyID)))
	defer func() { endSpan(span, err) }()
	cctx := g.outgoing(ctx)
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

// Infer sends an infer request (its inputs raw) with ModelInfer.
func (g *grpcTransport) Infer(ctx context.Context, req *oip.InferenceRequest) (*oip.InferenceResponse, error) {
	m, err := oippb.NewRequest(g.c.model, g.c.variant, req)
	if err != nil {
		return nil, err
	}
	resp, err := grpcCall(ctx, g, "ModelInfer", func(ctx context.Context) (*oippb.ModelInferResponse, error) {
		return g.oip.ModelInfer(ctx, m)
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

// request builds the infer request of a task with every input raw, as
// gRPC carries them.
func (g *grpcTransport) request(task *spec.InferenceTaskProfile, call, load map[string]any) (*oip.InferenceRequest, error) {
	inputs, err := oip.EncodeInputsRaw(task, call, load)
	if err != nil {
		return nil, err
	}
	if inputs == nil {
		inputs = []oip.Tensor{}
	}
	return &oip.InferenceRequest{Inputs: inputs, Parameters: oip.Parameters{"task": task.TaskID}}, nil
}

// sessionRequest is request: a session's first message carries its
// inputs raw too.
func (g *grpcTransport) sessionRequest(task *spec.InferenceTaskProfile, call map[string]any) (*oip.InferenceRequest, error) {
	return g.request(task, call, nil)
}

// metadata answers Metadata over gRPC: the REST metadata's fields, its
// parameters from the property "parameters".
func (g *grpcTransport) metadata(ctx context.Context) (*oip.ModelMetadata, error) {
	md, err := grpcCall(ctx, g, "ModelMetadata", func(ctx context.Context) (*oippb.ModelMetadataResponse, error) {
		return g.oip.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: g.c.model, Version: g.c.variant})
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

// ready answers Ready over gRPC.
func (g *grpcTransport) ready(ctx context.Context) error {
	r, err := grpcCall(ctx, g, "ModelReady", func(ctx context.Context) (*oippb.ModelReadyResponse, error) {
		return g.oip.ModelReady(ctx, &oippb.ModelReadyRequest{Name: g.c.model, Version: g.c.variant})
	})
	if err != nil {
		return err
	}
	if !r.GetReady() {
		return &StatusError{Status: 503, Message: "the model is not ready"}
	}
	return nil
}

// openSession opens a ModelStreamInfer call and sends start on it. The
// call's end is the session's: it is not kept.
func (g *grpcTransport) openSession(ctx context.Context, start *oip.InferenceRequest) (oip.SessionConn, func(), error) {
	m, err := oippb.NewRequest(g.c.model, g.c.variant, start)
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(g.outgoing(ctx))
	st, err := g.rt.ModelStreamInfer(sctx)
	if err != nil {
		cancel()
		return nil, nil, grpcError(ctx, err)
	}
	// A send that meets the end of the call (io.EOF) leaves its status to
	// the first Receive.
	if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: m}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, nil, grpcError(ctx, err)
	}
	return &grpcConn{st: st, cancel: cancel}, nil, nil
}

// close closes the connection.
func (g *grpcTransport) close() error { return g.conn.Close() }

// grpcConn is the client's end of a session on a ModelStreamInfer call.
type grpcConn struct {
	st     oippb.RealtimeInferenceService_ModelStreamInferClient
	cancel context.CancelFunc // ends the call
}

// Send sends one controls message.
func (g *grpcConn) Send(ctx context.Context, m oip.ControlsRequest) error {
	err := g.st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{
		Controls: &oippb.SessionControls{Controls: m.Controls, Ack: m.Ack, Snapshot: m.Snapshot,
			ClearControls: m.Controls != nil && len(m.Controls) == 0}}})
	if err != nil {
		return grpcError(ctx, err)
	}
	return nil
}

// Receive returns the call's next message: the end of the call is the
// session's end (OK) or its error (the status of any other code).
func (g *grpcConn) Receive(context.Context) (oip.SessionMessage, error) {
	msg, err := g.st.Recv()
	if errors.Is(err, io.EOF) {
		return oip.SessionMessage{Event: oip.EventEnd}, nil
	}
	if err != nil {
		st, ok := grpcstatus.FromError(err)
		if !ok {
			return oip.SessionMessage{}, err
		}
		return oip.SessionMessage{Event: oip.EventError, Error: st.Message(), Status: oippb.HTTPStatus(st.Code())}, nil
	}
	switch m := msg.GetMessage().(type) {
	case *oippb.ModelStreamInferResponse_Session:
		info := &oip.SessionInfo{ID: m.Session.GetId()}
		json.Unmarshal([]byte(m.Session.GetRealtime()), &info.Realtime)
		return oip.SessionMessage{Event: oip.EventSession, Session: info}, nil
	case *oippb.ModelStreamInferResponse_Chunk:
		resp, err := oippb.DecodeResponse(m.Chunk)
		if err != nil {
			return oip.SessionMessage{}, fmt.Errorf("malformed chunk: %w", err)
		}
		return oip.SessionMessage{Event: oip.EventChunk, Chunk: resp}, nil
	case *oippb.ModelStreamInferResponse_Controls:
		return oip.SessionMessage{Event: oip.EventControls, Controls: m.Controls.GetControls()}, nil
	case *oippb.ModelStreamInferResponse_Snapshot:
		return oip.SessionMessage{Event: oip.EventSnapshot, Snapshot: &oip.SnapshotInfo{Token: m.Snapshot.GetToken(), Next: m.Snapshot.GetNext()}}, nil
	case *oippb.ModelStreamInferResponse_ErrorMessage:
		return oip.SessionMessage{Event: oip.EventRefused, Error: m.ErrorMessage}, nil
	}
	return oip.SessionMessage{}, fmt.Errorf("unexpected message %v", msg)
}

// Close ends the call.
func (g *grpcConn) Close() error {
	g.cancel()
	return nil
}

// errNotGRPC refuses options that only apply to REST on a gRPC client.
var errNotGRPC = errors.New("remote: WithHTTPClient and WithJSONTensors apply to http:// and https:// URLs, not grpc://")

// errNotTLS refuses WithTLSConfig on a URL other than grpcs://.
var errNotTLS = errors.New("remote: WithTLSConfig applies to grpcs:// URLs (an https:// client takes its TLS from WithHTTPClient)")
