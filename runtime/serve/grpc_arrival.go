package serve

// The arrival path of a gRPC call: what grpc-go lets a server do before a
// call's message is read. grpc-go reads a unary call's whole message, and
// decodes it, before any handler or interceptor runs; so that a call that
// will be refused never has its message read, and one that is admitted
// has its bytes counted before they are decoded:
//
//   - grpcTap, the transport's tap handle, runs when a call's headers
//     arrive: the drain check, the bearer token (one authorization value),
//     and the call's context, which the server can end (a session whose
//     client stops reading) and which for ModelInfer carries the deadline
//     from arrival, so that a message still arriving at the deadline ends. A refused call is answered from the
//     headers, its message never read; the refusal is logged and counted.
//   - ModelInfer is registered as a stream handler (the wire is the same
//     for a unary call), so that it runs before its message is read: it
//     reserves the largest message's bytes while the message arrives
//     (waiting for them, see admission.reserveWait: a gRPC message
//     declares no size before it is read), then exchanges them for the
//     message's own, then decodes it with oippb.Unmarshal, which counts
//     what decoding takes before it decodes. Realtime sessions receive
//     every message the same way.
//   - rawCodec leaves a request message's bytes undecoded for that.

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the proto codec rawCodec delegates to
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

const methodModelInfer = "/inference.GRPCInferenceService/ModelInfer"

// arrivedKey is the context key of a gRPC call's arrival, stamped by
// grpcTap; cancelKey of the function that ends the call (its stream's
// context, which grpcTap makes: its reads and writes end with it).
type (
	arrivedKey struct{}
	cancelKey  struct{}
)

// callCancel returns the function that ends the call of ctx (grpcTap's),
// with cause as the call's answer (nil: as though its client went away).
func callCancel(ctx context.Context) context.CancelCauseFunc {
	if c, ok := ctx.Value(cancelKey{}).(context.CancelCauseFunc); ok {
		return c
	}
	return func(error) {}
}

// grpcTap runs the arrival steps that need no message when a call's
// headers arrive (see the top of this file). It runs on the connection's
// reader: it must not block.
func (s *Server) grpcTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	now := time.Now()
	s.lastSeen.Store(now.UnixNano())
	ctx = context.WithValue(ctx, arrivedKey{}, now)
	method := info.FullMethodName
	if method == methodServerLive || method == methodServerReady || isHealthMethod(method) {
		return ctx, nil
	}
	var err error
	var key *apiKey
	switch values := info.Header.Get("authorization"); {
	case s.draining.Load():
		err = errDraining
	case s.keys == nil:
	case len(values) > 1:
		err = withStatus(http.StatusUnauthorized, "%d authorization values: send one (authorization: Bearer TOKEN)", len(values))
	case len(values) == 0:
	default:
		key = s.keys.match(bearerToken(values[0]))
	}
	if err == nil && s.keys != nil {
		if key == nil {
			err = withStatus(http.StatusUnauthorized, "missing or wrong bearer token (send the metadata authorization: Bearer TOKEN)")
		} else {
			ctx = withKey(ctx, key)
			err = key.admit(now)
		}
	}
	if err != nil {
		return nil, s.grpcRefused(ctx, method, err, now)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	end := cancel
	if method == methodModelInfer && s.cfg.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, now.Add(s.cfg.Timeout))
		end = func(cause error) {
			cancel(cause)
			stop()
		}
	}
	// grpcBegin's done ends the call when its handler has returned.
	return context.WithValue(ctx, cancelKey{}, end), nil
}

// grpcRefused records a call the tap refused — the access log record and
// the metric that grpcBegin gives the calls it sees — and returns its gRPC
// error.
func (s *Server) grpcRefused(ctx context.Context, method string, err error, at time.Time) error {
	code := status(err)
	gerr := grpcstatus.Error(oippb.Code(code), err.Error())
	label := method
	if !slices.Contains(grpcMethods(), method) {
		label = unknownLabel // a client's text is no label
	}
	if m := s.tel.m; m != nil {
		m.grpc.WithLabelValues(label, grpcstatus.Code(gerr).String()).Inc()
		m.countKey(keyOf(ctx), code)
	}
	if s.cfg.Logger.Enabled(ctx, slog.LevelInfo) {
		attrs := []slog.Attr{
			slog.String("method", truncate(method, 128)), slog.String("code", grpcstatus.Code(gerr).String()), slog.Int("status", code),
			slog.Float64("duration_ms", float64(time.Since(at).Microseconds())/1000), slog.String("error", err.Error()),
		}
		if k := keyOf(ctx); k != nil {
			attrs = append(attrs, slog.String("key", k.Name))
		}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			attrs = append(attrs, slog.String("remote", p.Addr.String()))
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "grpc request", attrs...)
	}
	return gerr
}

// truncate cuts s to at most n bytes, for a log record.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// inferenceService is the protocol's GRPCInferenceService with ModelInfer
// as a stream handler, so that it runs before its message is read.
func inferenceService() *grpc.ServiceDesc {
	d := oippb.GRPCInferenceService_ServiceDesc
	d.Methods = slices.DeleteFunc(slices.Clone(d.Methods), func(m grpc.MethodDesc) bool { return m.MethodName == "ModelInfer" })
	d.Streams = append(slices.Clone(d.Streams), grpc.StreamDesc{
		StreamName: "ModelInfer",
		Handler:    func(srv any, ss grpc.ServerStream) error { return srv.(*grpcService).modelInfer(ss) },
		// Said to take a stream of messages so that grpc-go runs the
		// stream interceptor (grpcStream) around it, as for any stream;
		// the call reads one message, as a unary call sends.
		ClientStreams: true,
	})
	return &d
}

// rawMessage is a request message read but not decoded: its bytes.
type rawMessage struct{ buf mem.Buffer }

// bytes returns the message's bytes; free releases them.
func (r *rawMessage) bytes() []byte { return r.buf.ReadOnlyData() }
func (r *rawMessage) free() {
	if r.buf != nil {
		r.buf.Free()
		r.buf = nil
	}
}

// rawCodec is the proto codec, but a *rawMessage takes a message's bytes
// as they are.
type rawCodec struct{ proto encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{proto: encoding.GetCodecV2("proto")} }

func (c rawCodec) Name() string                           { return c.proto.Name() }
func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }
func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// receive reads the next message of a call into m, decoded, its bytes
// counted in hold: the largest message's bytes (twice, as for a REST
// body) are reserved while it arrives, waiting for them until ctx ends,
// then exchanged for the message's own; what decoding takes is reserved
// before it is decoded (oippb.Unmarshal). A malformed message is
// InvalidArgument.
func (s *Server) receive(ctx context.Context, ss grpc.ServerStream, m proto.Message, hold *holding) error {
	arriving := bodyCost * s.cfg.MaxBodyBytes
	if err := hold.addWait(ctx, arriving); err != nil {
		return err
	}
	var raw rawMessage
	defer raw.free()
	end := callCancel(ctx)
	received := s.whileReceiving(func() { end(errDrainingArriving) })
	err := ss.RecvMsg(&raw)
	received()
	if err != nil {
		hold.give(arriving)
		return err
	}
	hold.give(arriving - bodyCost*int64(len(raw.bytes()))) // keeps the message's own

	lim := s.lim
	lim.Reserve = hold.add
	return oippb.Unmarshal(raw.bytes(), m, lim)
}
