package serve_test

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// The standard gRPC health service answers without a token (an
// orchestrator's probe has none): NOT_SERVING until Load has loaded and
// warmed up what a service names (the server "", a model, MODEL/VERSION),
// SERVING after, NOT_SERVING again once Shutdown begins; an unknown name is
// NotFound. A Watch sees each change and ends at the drain, so it does
// not hold the gRPC server's graceful stop.
func TestGRPCHealth(t *testing.T) {
	t.Parallel()
	var fams []serve.Family
	for _, name := range []string{"tiny-encoder", "tiny-world"} {
		fams = append(fams, serve.Family{Spec: loadSpec(t, name), Options: clientOptions(t)})
	}
	srv, err := serve.New(serve.Config{Token: "sesame"}, fams...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("check %q: %v", service, err)
		}
		return r.Status
	}
	services := []string{"", "tiny-encoder", "tiny-world", "tiny-world/default"}
	for _, sv := range services {
		if st := check(sv); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("before Load, %q is %v", sv, st)
		}
	}
	for _, sv := range []string{"nope", "tiny-world/v9"} {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: sv}); code(err) != codes.NotFound {
			t.Errorf("check %q: %v, want NotFound", sv, err)
		}
	}
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		r, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		return r.Status
	}
	if st := next(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("watch before Load: %v", st)
	}

	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	for _, sv := range services {
		if st := check(sv); st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("after Load, %q is %v", sv, st)
		}
	}
	if st := next(); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("watch after Load: %v", st)
	}
	list, err := hc.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(list.Statuses) != 5 || list.Statuses["tiny-encoder/default"].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("list: %v %v", list, err)
	}

	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("draining, the server is %v", st)
	}
	if st := next(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("watch at the drain: %v", st)
	}
	if _, err := watch.Recv(); err != io.EOF {
		t.Errorf("the watch after the drain: %v, want its end", err)
	}
	stopped := make(chan bool, 1)
	go func() { gs.GracefulStop(); stopped <- true }()
	enginetest.Receive(t, "the gRPC server's graceful stop", stopped)
}
