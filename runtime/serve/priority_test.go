package serve_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// Waiters for an engine slot are served by priority level (Triton's
// "priority" request parameter: 1 first, larger later, 0 or none the
// server's default), then in arrival order; a request's "timeout" (µs)
// bounds its wait: past it, it is answered DeadlineExceeded (504) without
// running. One engine slot, held by a first request, while four queue.
func TestPriorityAndQueueTimeout(t *testing.T) {
	t.Parallel()
	world := enginetest.OverDefault(t)
	order := make(chan string, 16)
	hold := make(chan struct{})
	world.OnCall = func(ctx context.Context, c enginetest.Call, next func(context.Context, map[string]any) (any, error)) (any, error) {
		prompt, _ := c.Kwargs["prompt"].(string)
		order <- prompt
		if prompt == "first" {
			<-hold
		}
		return next(ctx, c.Kwargs)
	}
	defer close(hold)
	s := withGRPC(t, serveFamilies(t, serve.Config{MaxConcurrent: 1, NoWarmup: true}, onEngine(t, "tiny-world", world), plain(t, "tiny-encoder")))
	req := func(prompt string, params map[string]int64) *oippb.ModelInferRequest {
		r := &oippb.ModelInferRequest{ModelName: "tiny-world", Parameters: map[string]*oippb.InferParameter{},
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{
				{Name: "prompt", Datatype: "BYTES", Shape: []int64{1}}, {Name: "num_frames", Datatype: "INT64", Shape: []int64{1}},
				{Name: "height", Datatype: "INT64", Shape: []int64{1}}, {Name: "width", Datatype: "INT64", Shape: []int64{1}}},
			RawInputContents: [][]byte{rawString(prompt), rawInt64(1), rawInt64(16), rawInt64(16)}}
		for k, v := range params {
			r.Parameters[k] = &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: v}}
		}
		return r
	}
	done := make(chan string, 16)
	send := func(prompt string, params map[string]int64) {
		go func() {
			_, err := s.oip.ModelInfer(context.Background(), req(prompt, params))
			done <- prompt + ": " + code(err).String()
		}()
	}
	send("first", nil)
	if got := enginetest.Receive(t, "the first call in the engine", order); got != "first" {
		t.Fatalf("first call %q", got)
	}
	// Queued in this order: two at the default level, one at level 5,
	// one at level 1, and one whose timeout passes while it waits.
	for i, q := range []struct {
		prompt string
		params map[string]int64
	}{
		{"default-a", nil}, {"low", map[string]int64{"priority": 5}}, {"default-b", map[string]int64{"priority": 0}},
		{"high", map[string]int64{"priority": 1}}, {"impatient", map[string]int64{"timeout": 1000}},
	} {
		send(q.prompt, q.params)
		if q.prompt != "impatient" { // it leaves the queue a millisecond later
			enginetest.WaitFor(t, "the request to queue", func() bool { return s.srv.Stats().Admitted == int64(i+2) })
		}
	}
	if got := enginetest.Receive(t, "the impatient request's answer", done); got != "impatient: DeadlineExceeded" {
		t.Errorf("a request past its timeout: %s", got)
	}
	hold <- struct{}{}
	var got []string
	for range 4 {
		got = append(got, enginetest.Receive(t, "the next call in the engine", order))
	}
	want := []string{"high", "default-a", "default-b", "low"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("engine calls after the first: %v, want %v", got, want)
		}
	}
	for range 5 {
		if a := enginetest.Receive(t, "an answer", done); a[len(a)-2:] != "OK" {
			t.Errorf("answer %s", a)
		}
	}
	if _, err := s.oip.ModelInfer(context.Background(), req("bad", map[string]int64{"priority": -1})); code(err) != codes.InvalidArgument {
		t.Errorf("a negative priority: %v", err)
	}
}

// A family's default_priority is the level of its requests that name
// none: with the family at 6, a request without a priority enters the
// engine after one at level 5 and before one at level 7.
func TestFamilyDefaultPriority(t *testing.T) {
	t.Parallel()
	world := enginetest.OverDefault(t)
	order := make(chan string, 16)
	hold := make(chan struct{})
	world.OnCall = func(ctx context.Context, c enginetest.Call, next func(context.Context, map[string]any) (any, error)) (any, error) {
		prompt, _ := c.Kwargs["prompt"].(string)
		order <- prompt
		if prompt == "first" {
			<-hold
		}
		return next(ctx, c.Kwargs)
	}
	defer close(hold)
	fam := onEngine(t, "tiny-world", world)
	fam.Spec.DefaultPriority = 6
	s := withGRPC(t, serveFamilies(t, serve.Config{MaxConcurrent: 1, NoWarmup: true}, fam))
	send := func(prompt string, params map[string]int64) {
		r := &oippb.ModelInferRequest{ModelName: "tiny-world", Parameters: map[string]*oippb.InferParameter{},
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{
				{Name: "prompt", Datatype: "BYTES", Shape: []int64{1}}, {Name: "num_frames", Datatype: "INT64", Shape: []int64{1}},
				{Name: "height", Datatype: "INT64", Shape: []int64{1}}, {Name: "width", Datatype: "INT64", Shape: []int64{1}}},
			RawInputContents: [][]byte{rawString(prompt), rawInt64(1), rawInt64(16), rawInt64(16)}}
		for k, v := range params {
			r.Parameters[k] = &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: v}}
		}
		go s.oip.ModelInfer(context.Background(), r)
	}
	send("first", nil)
	if got := enginetest.Receive(t, "the first call in the engine", order); got != "first" {
		t.Fatalf("first call %q", got)
	}
	for i, q := range []struct {
		prompt string
		params map[string]int64
	}{{"seven", map[string]int64{"priority": 7}}, {"family-default", nil}, {"five", map[string]int64{"priority": 5}}} {
		send(q.prompt, q.params)
		enginetest.WaitFor(t, "the request to queue", func() bool { return s.srv.Stats().Admitted == int64(i+2) })
	}
	hold <- struct{}{}
	var got []string
	for range 3 {
		got = append(got, enginetest.Receive(t, "the next call in the engine", order))
	}
	if want := []string{"five", "family-default", "seven"}; !slices.Equal(got, want) {
		t.Errorf("entered the engine in the order %v, want %v", got, want)
	}
}
