package serve

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
)

// The standard gRPC health service (grpc.health.v1), so that an
// orchestrator's gRPC probe (Kubernetes' grpc: probe) reads readiness
// without a token: service "" is the server (ServerReady, GET
// /v2/health/ready), service NAME a model (its default version, as GET
// /v2/models/NAME/ready), NAME/VERSION one version of it. A status is
// NOT_SERVING until Load has loaded and warmed up what it names, and from
// the moment Shutdown begins; an unknown name is NotFound. Watch sends the
// status, then each change, and ends (OK) once the server drains, after
// sending NOT_SERVING — so an open Watch never holds the gRPC server's
// graceful stop.

// healthPrefix is the health service's methods' prefix: the tap lets them
// through without a token and while draining.
const healthPrefix = "/grpc.health.v1.Health/"

// isHealthMethod reports whether method is one of the health service's.
func isHealthMethod(method string) bool { return strings.HasPrefix(method, healthPrefix) }

// healthService is the health service of a Server's models.
type healthService struct {
	healthpb.UnimplementedHealthServer
	s *Server

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when a status may have changed
}

func newHealthService(s *Server) *healthService {
	return &healthService{s: s, changed: make(chan struct{})}
}

// notify wakes the watchers: a status may have changed (a load, the drain).
func (h *healthService) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.changed)
	h.changed = make(chan struct{})
}

// wait returns the channel the next notify closes.
func (h *healthService) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// status returns a service's status now, or NotFound.
func (h *healthService) status(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	s := h.s
	var err error
	switch name, version, hasVersion := strings.Cut(service, "/"); {
	case service == "":
		err = s.ready()
	default:
		m := s.cat().models[name]
		if m == nil {
			return 0, grpcstatus.Errorf(codes.NotFound, "unknown service %q: want \"\", a model or MODEL/VERSION", service)
		}
		if !hasVersion {
			dv, _ := m.oip.Spec.Variant("")
			version = dv.VariantID
		}
		v, n := m.variants[version], int64(0)
		if i := strings.LastIndexByte(version, '@'); v == nil && i > 0 {
			// VARIANT@N: a revision, serving while it is served (the
			// newest, or kept by a version policy; revision.go).
			if k, perr := strconv.ParseInt(version[i+1:], 10, 64); perr == nil && k > 0 {
				v, n = m.variants[version[:i]], k
			}
		}
		if v == nil {
			return 0, grpcstatus.Errorf(codes.NotFound, "model %q has no version %q", name, version)
		}
		err = v.ready(m)
		if err == nil && n > 0 && !v.serves(n) {
			err = errNoRevision(v, n)
		}
	}
	if err != nil || s.draining.Load() {
		return healthpb.HealthCheckResponse_NOT_SERVING, nil
	}
	return healthpb.HealthCheckResponse_SERVING, nil
}

// Check answers a service's status now.
func (h *healthService) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, err := h.status(req.GetService())
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List answers every service's status.
func (h *healthService) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	names := []string{""}
	for _, m := range h.s.cat().order {
		names = append(names, m.oip.Spec.ModelFamilyID)
		for _, v := range m.versions() {
			names = append(names, m.oip.Spec.ModelFamilyID+"/"+v)
		}
	}
	for _, n := range names {
		st, _ := h.status(n)
		out.Statuses[n] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch sends a service's status, then each change, until the client goes
// away or the server drains (then NOT_SERVING is the last message).
func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	var last healthpb.HealthCheckResponse_ServingStatus = -1
	for {
		woken := h.wait()
		st, err := h.status(req.GetService())
		if err != nil {
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN // as grpc-go's Watch: the service may appear
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if h.s.draining.Load() {
			return nil
		}
		select {
		case <-woken:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}
