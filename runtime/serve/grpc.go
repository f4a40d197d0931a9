package serve

// The Open Inference Protocol's gRPC API (oippb.GRPCInferenceServiceServer:
// ServerLive, ServerReady, ServerMetadata, ModelReady, ModelMetadata,
// ModelInfer) and wfgen's realtime sessions on one bidirectional stream
// (oippb.RealtimeInferenceServiceServer: ModelStreamInfer), served by the
// same Server as the REST API: the same models, tasks and variants, the
// same limits (in-flight bytes, admission, engine slots, tensor size,
// sessions), the same bearer token, deadlines and metrics. A call takes
// the arrival path every transport takes (arrival.go; its gRPC steps are
// in grpc_arrival.go); only the message conversions (oippb) and the status
// codes differ. Errors are the REST statuses mapped to gRPC codes
// (grpcAnswer).

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

// RealtimeExtension is the extension the gRPC ServerMetadata lists for the
// realtime session RPC (wfgen.realtime.RealtimeInferenceService).
const RealtimeExtension = "realtime_sessions"

// The methods that need no bearer token and are answered while the server
// drains: the health probes, as GET /v2/health/live and /ready.
const (
	methodServerLive  = "/inference.GRPCInferenceService/ServerLive"
	methodServerReady = "/inference.GRPCInferenceService/ServerReady"
	// methodModelStreamInfer is the realtime sessions' call.
	methodModelStreamInfer = "/wfgen.realtime.RealtimeInferenceService/ModelStreamInfer"
)

// GRPCServer returns a gRPC server that serves s over the Open Inference
// Protocol's gRPC API and the realtime session RPC, with the gRPC
// reflection service (so that tools such as grpcurl need no .proto), and
// these bounds: a message of at most Config.MaxBodyBytes, at most
// MaxQueue + MaxSessions + 16 calls at once on one connection, a
// connection closed after Config.IdleTimeout without an RPC and one whose
// handshake takes over 10 s. opts are added after
// them. Serve it on a listener of its own (wfserve -grpc-addr); to stop,
// call Shutdown (which ends open sessions and waits for infer calls), then
// the gRPC server's GracefulStop.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(min(s.cfg.MaxBodyBytes, 1<<31-1))),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.IdleTimeout}),
		grpc.ConnectionTimeout(10 * time.Second),
		// Calls at once on one connection: what admission and the session
		// limit would take anyway, and a few probes.
		grpc.MaxConcurrentStreams(uint32(min(s.cfg.MaxQueue+s.cfg.MaxSessions+16, 1<<20))),
		// Calls run on long-lived goroutines whose stacks have grown to
		// what a call needs, instead of a fresh goroutine growing its stack
		// anew per call (runtime.morestack: 7 % of the server's CPU on the
		// tiny encoder, docs/benchmarks/README.md); one per admitted infer
		// request up to maxStreamWorkers (they start with the server), and
		// a call beyond those gets a goroutine of its own.
		grpc.NumStreamWorkers(uint32(min(s.cfg.MaxQueue, maxStreamWorkers))),
		// The arrival steps before a message is read (grpc_arrival.go).
		grpc.InTapHandle(s.grpcTap),
		grpc.ForceServerCodecV2(newRawCodec()),
		// A fixed window: a call's message arrives only once its handler
		// asks for it (BDP estimation would let it grow to 16 MiB before).
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(16 * streamWindow),
		grpc.ChainUnaryInterceptor(s.grpcUnary),
		grpc.ChainStreamInterceptor(s.grpcStream),
	}
	gs := grpc.NewServer(append(base, opts...)...)
	svc := &grpcService{s: s}
	gs.RegisterService(inferenceService(), svc)
	oippb.RegisterRealtimeInferenceServiceServer(gs, svc)
	healthpb.RegisterHealthServer(gs, s.health)
	reflection.Register(gs)
	return gs
}

// streamWindow is the HTTP/2 flow-control window of a gRPC call: what a
// client may send of its message before the handler reads it (HTTP/2's
// default).
const streamWindow = 64 << 10

// maxStreamWorkers bounds the goroutines GRPCServer starts for calls,
// whatever Config.MaxQueue: 256, the default MaxQueue.
const maxStreamWorkers = 256

// grpcMethods are the full names of the methods GRPCServer serves (the
// reflection service's left out).
func grpcMethods() []string {
	var out []string
	for _, d := range []grpc.ServiceDesc{oippb.GRPCInferenceService_ServiceDesc, oippb.RealtimeInferenceService_ServiceDesc} {
		for _, m := range d.Methods {
			out = append(out, "/"+d.ServiceName+"/"+m.MethodName)
		}
		for _, st := range d.Streams {
			out = append(out, "/"+d.ServiceName+"/"+st.StreamName)
		}
	}
	return out
}

// grpcService implements the gRPC services over a Server.
type grpcService struct {
	oippb.UnimplementedGRPCInferenceServiceServer
	oippb.UnimplementedRealtimeInferenceServiceServer
	s *Server
}

// grpcAnswer returns the REST status and the gRPC error of a handler's
// error, given the call's own context (ended: the client went away or its
// deadline passed).
func grpcAnswer(call context.Context, err error) (int, error) {
	if err == nil {
		return http.StatusOK, nil
	}
	cause := context.Cause(call)
	if cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		err = cause // the server ended the call, and says why
	} else if st, ok := grpcstatus.FromError(err); ok {
		return oippb.HTTPStatus(st.Code()), err
	}
	code := status(err)
	switch {
	case errors.Is(cause, context.Canceled):
		code = statusClientGone
	case errors.Is(cause, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	return code, grpcstatus.Error(oippb.Code(code), err.Error())
}

// grpcUnary is the unary calls' middleware: what observe does for REST
// requests (drainGuard's and auth's steps are grpcTap's).
func (s *Server) grpcUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, done := s.grpcBegin(ctx, info.FullMethod, func(md metadata.MD) { grpc.SetHeader(ctx, md) })
	resp, err := handler(ctx, req)
	return resp, done(err)
}

// grpcStream is the streaming calls' middleware (see grpcUnary).
func (s *Server) grpcStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, done := s.grpcBegin(ss.Context(), info.FullMethod, func(md metadata.MD) { ss.SetHeader(md) })
	return done(handler(srv, &grpcServerStream{ServerStream: ss, ctx: ctx}))
}

// grpcServerStream is a ServerStream with the middleware's context.
type grpcServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (g *grpcServerStream) Context() context.Context { return g.ctx }

// grpcBegin stamps a call's arrival, gives it a correlation id (the
// x-request-id metadata, or a fresh one sent back in that header) and
// starts its span; done maps the handler's error to the gRPC status,
// records the call's metrics and writes its access log record.
func (s *Server) grpcBegin(ctx context.Context, method string, header func(metadata.MD)) (context.Context, func(error) error) {
	start, _ := ctx.Value(arrivedKey{}).(time.Time) // grpcTap's stamp
	if start.IsZero() {
		start = time.Now()
	}
	cancelCall := callCancel(ctx)
	call := ctx
	id := first(metadata.ValueFromIncomingContext(ctx, "x-request-id"))
	if id == "" || len(id) > 128 {
		id = newID(8)
	}
	header(metadata.Pairs("x-request-id", id))
	ri := &reqInfo{arrived: start, key: keyOf(ctx)}
	ctx = context.WithValue(ctx, infoKey{}, ri)
	fields := logctx.Fields{"request_id": id}
	ctx = s.tel.startGRPCSpan(ctx, method, ri, id, fields)
	ctx = logctx.With(ctx, fields)
	return ctx, func(err error) error {
		// The call's context ends with the handler — but not a session's:
		// its reader is still in a Recv, which, cancelled, would answer
		// the call itself (grpc-go writes a failed Recv's status,
		// Canceled) before grpc-go writes the handler's (Unavailable at a
		// drain). grpc-go cancels the call's context once it has written
		// the status, and that ends the Recv.
		if method != methodModelStreamInfer {
			defer cancelCall(nil)
		}
		code, gerr := grpcAnswer(call, err)
		end := time.Now()
		gcode := grpcstatus.Code(gerr)
		if m := s.tel.m; m != nil {
			m.grpc.WithLabelValues(method, gcode.String()).Inc()
			m.countKey(ri.key, code)
			ri.answered(code, end)
		}
		if ri.span != nil {
			if o := ri.obs; o != nil {
				ri.span.SetAttributes(o.attrs()...)
			}
			ri.span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(gcode)))
			if code >= 500 {
				ri.span.SetStatus(otelcodes.Error, grpcstatus.Convert(gerr).Message())
			}
			ri.span.End(trace.WithTimestamp(end))
		}
		if !s.cfg.Logger.Enabled(ctx, slog.LevelInfo) {
			return gerr
		}
		attrs := []slog.Attr{
			slog.String("method", method), slog.String("code", gcode.String()), slog.Int("status", code),
			slog.Float64("duration_ms", float64(end.Sub(start).Microseconds())/1000),
		}
		if p, ok := peer.FromContext(call); ok && p.Addr != nil {
			attrs = append(attrs, slog.String("remote", p.Addr.String()))
		}
		if gerr != nil {
			attrs = append(attrs, slog.String("error", grpcstatus.Convert(gerr).Message()))
		}
		if name := keyName(ri); name != "" {
			attrs = append(attrs, slog.String("key", name))
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "grpc request", attrs...)
		return gerr
	}
}

// first returns the first of a metadata key's values, "" for none.
func first(values []string) string {
	if len(values) > 0 {
		return values[0]
	}
	return ""
}

// startGRPCSpan starts a call's server span, a child of the trace context
// its metadata carry (traceparent). Without a tracer it does nothing.
func (t *telemetry) startGRPCSpan(ctx context.Context, method string, ri *reqInfo, id string, fields logctx.Fields) context.Context {
	if t.tracer == nil {
		return ctx
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = t.prop.Extract(ctx, oippb.MetadataCarrier(md))
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	ctx, span := t.tracer.Start(ctx, strings.TrimPrefix(method, "/"), trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(ri.arrived),
		trace.WithAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", name),
			attribute.String("wfserve.request_id", id)))
	ri.span = span
	if sc := span.SpanContext(); sc.IsValid() {
		fields["trace_id"] = sc.TraceID().String()
	}
	return ctx
}

// lookup resolves a model name (family id or alias) and version (variant
// id or alias, "" for none) as the REST paths' {model} and {version} are:
// 404 for an unknown one, 403 for one the request's key may not use. v is
// nil when version is "". A version VARIANT@N names revision N of the
// variant (lookupRevision).
func (s *Server) lookup(ctx context.Context, name, version string) (*model, *variant, error) {
	m, v, _, err := s.lookupRevision(ctx, name, version)
	return m, v, err
}

// lookupRevision is lookup, and the revision the version names: N of
// VARIANT@N, which the variant must serve now (the newest, or one its
// version policy keeps: 404 naming those it serves otherwise); 0 when the
// version names a variant only.
func (s *Server) lookupRevision(ctx context.Context, name, version string) (*model, *variant, int64, error) {
	m, ok := s.cat().models[name]
	if !ok {
		return nil, nil, 0, withStatus(http.StatusNotFound, "no model %q (served: %s)", name, s.modelNames())
	}
	if err := checkModel(ctx, m.oip.Spec.ModelFamilyID); err != nil {
		return nil, nil, 0, err
	}
	if version == "" {
		return m, nil, 0, nil
	}
	vs, err := m.oip.Spec.Variant(version)
	if err == nil {
		return m, m.variants[vs.VariantID], 0, nil
	}
	if i := strings.LastIndexByte(version, '@'); i > 0 {
		n, perr := strconv.ParseInt(version[i+1:], 10, 64)
		if vs, verr := m.oip.Spec.Variant(version[:i]); verr == nil && perr == nil && n > 0 {
			v := m.variants[vs.VariantID]
			if !v.serves(n) {
				return m, nil, 0, errNoRevision(v, n)
			}
			return m, v, n, nil
		}
	}
	return m, nil, 0, &statusError{status: http.StatusNotFound, err: err}
}

// RepositoryIndex answers as POST /v2/repository/index.
func (g *grpcService) RepositoryIndex(ctx context.Context, r *oippb.RepositoryIndexRequest) (*oippb.RepositoryIndexResponse, error) {
	out := &oippb.RepositoryIndexResponse{}
	for _, e := range g.s.indexEntries(ctx, r.GetReady()) {
		out.Models = append(out.Models, &oippb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason})
	}
	return out, nil
}

// RepositoryModelLoad answers as POST /v2/repository/models/{model}/load.
func (g *grpcService) RepositoryModelLoad(ctx context.Context, r *oippb.RepositoryModelLoadRequest) (*oippb.RepositoryModelLoadResponse, error) {
	m, _, err := g.s.lookup(ctx, r.GetModelName(), "")
	if err == nil {
		err = g.s.loadOrUnload(ctx, m, true)
	}
	if err != nil {
		return nil, err
	}
	return &oippb.RepositoryModelLoadResponse{}, nil
}

// RepositoryModelUnload answers as POST
// /v2/repository/models/{model}/unload.
func (g *grpcService) RepositoryModelUnload(ctx context.Context, r *oippb.RepositoryModelUnloadRequest) (*oippb.RepositoryModelUnloadResponse, error) {
	m, _, err := g.s.lookup(ctx, r.GetModelName(), "")
	if err == nil {
		err = g.s.loadOrUnload(ctx, m, false)
	}
	if err != nil {
		return nil, err
	}
	return &oippb.RepositoryModelUnloadResponse{}, nil
}

// ServerLive answers that the server is live.
func (g *grpcService) ServerLive(context.Context, *oippb.ServerLiveRequest) (*oippb.ServerLiveResponse, error) {
	return &oippb.ServerLiveResponse{Live: true}, nil
}

// ServerReady answers whether every variant has loaded and the server is
// not draining (GET /v2/health/ready's 200 or 503).
func (g *grpcService) ServerReady(context.Context, *oippb.ServerReadyRequest) (*oippb.ServerReadyResponse, error) {
	return &oippb.ServerReadyResponse{Ready: g.s.ready() == nil}, nil
}

// ServerMetadata answers GET /v2's metadata, with the realtime session
// RPC among the extensions.
func (g *grpcService) ServerMetadata(context.Context, *oippb.ServerMetadataRequest) (*oippb.ServerMetadataResponse, error) {
	md := g.s.metadata()
	return &oippb.ServerMetadataResponse{Name: md.Name, Version: md.Version, Extensions: append(md.Extensions, RealtimeExtension)}, nil
}

// metadata is the server's metadata (GET /v2): with a session key,
// snapshots are among the extensions.
func (s *Server) metadata() oip.ServerMetadata {
	ext := []string{oip.SessionsExtension, oip.BinaryExtension}
	if s.cfg.SessionKey != nil {
		ext = append(ext, oip.SnapshotsExtension)
	}
	return oip.ServerMetadata{Name: s.cfg.Name, Version: s.cfg.Version, Extensions: ext}
}

// ModelReady answers whether a model's variant (the default one when the
// request names no version) has loaded; NotFound for an unknown one.
func (g *grpcService) ModelReady(ctx context.Context, r *oippb.ModelReadyRequest) (*oippb.ModelReadyResponse, error) {
	m, v, err := g.s.lookup(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	if v == nil {
		dv, _ := m.oip.Spec.Variant("")
		v = m.variants[dv.VariantID]
	}
	return &oippb.ModelReadyResponse{Ready: v.ready(m) == nil}, nil
}

// ModelMetadata answers a model's metadata, as GET /v2/models/{model}
// does; the REST metadata's parameters (the default task and variant,
// every task's inputs and outputs) are the property "parameters", as JSON
// text, and each input's and output's parameters are left out.
func (g *grpcService) ModelMetadata(ctx context.Context, r *oippb.ModelMetadataRequest) (*oippb.ModelMetadataResponse, error) {
	m, _, err := g.s.lookup(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	md := m.metadata()
	out := &oippb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform}
	tensors := func(ts []oip.TensorMetadata) []*oippb.ModelMetadataResponse_TensorMetadata {
		list := make([]*oippb.ModelMetadataResponse_TensorMetadata, len(ts))
		for i, t := range ts {
			list[i] = &oippb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: string(t.Datatype), Shape: t.Shape}
		}
		return list
	}
	out.Inputs, out.Outputs = tensors(md.Inputs), tensors(md.Outputs)
	if len(md.Parameters) > 0 {
		b, err := json.Marshal(md.Parameters)
		if err != nil {
			return nil, err
		}
		out.Properties = map[string]string{"parameters": string(b)}
	}
	return out, nil
}

// modelInfer runs an infer request as POST /v2/models/{model}/infer does,
// its message read by receive (its bytes held in the in-flight budget from
// before it arrives, what decoding takes counted before it is decoded),
// resolved, admitted, run on its variant's engine slots (or batcher, or as
// a batch) within the earlier of the call's gRPC deadline and the server's
// Timeout from its arrival (grpcTap sets it), and answered with
// raw_output_contents. A request that asks for a stream is refused:
// sessions are RealtimeInferenceService/ModelStreamInfer's.
func (g *grpcService) modelInfer(ss grpc.ServerStream) error {
	s := g.s
	ctx := ss.Context()
	a, err := s.arrive(false)
	if err != nil {
		return err
	}
	defer a.done()
	var r oippb.ModelInferRequest
	if err := s.receive(ctx, ss, &r, &a.hold); err != nil {
		return err
	}
	m, pv, n, err := s.lookupRevision(ctx, r.GetModelName(), r.GetModelVersion())
	ctx = withRevision(ctx, n)
	if m == nil {
		setObs(ctx, s.tel.unknownModel)
	} else {
		setObs(ctx, s.tel.obs(m, ""))
	}
	if err != nil {
		return err
	}
	req, err := oippb.Request(&r, s.lim)
	if err != nil {
		return err
	}
	c, err := s.resolve(ctx, m, pv, req, false, &a.hold)
	if err != nil {
		return err
	}
	if c.stream {
		return withStatus(http.StatusBadRequest, "parameter \"stream\": a realtime session runs on the bidirectional RPC wfgen.realtime.RealtimeInferenceService/ModelStreamInfer")
	}
	resp, err := s.answer(ctx, c, allBinary)
	if err != nil {
		return err
	}
	out, err := oippb.Response(resp)
	if err != nil {
		return err
	}
	return ss.SendMsg(out)
}

// allBinary answers every output raw (raw_output_contents).
func allBinary(string) bool { return true }
