package client_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

// deadlineItems is the batch of the deadline tests: large enough for
// every loop over its items to look at the context many times.
const deadlineItems = 16 * client.ItemCheckInterval

// pollDeadline is a context whose deadline passes at a moment the test
// chooses, not on a clock: at its at-th poll (call of Err), or when expire
// is called. Its polls are counted, so a test can put the deadline at any
// point of a run's preparation and see where the run noticed it.
type pollDeadline struct {
	context.Context // Value: none
	mu              sync.Mutex
	polls, at       int
	done            chan struct{}
}

func newPollDeadline(at int) *pollDeadline {
	return &pollDeadline{Context: context.Background(), at: at, done: make(chan struct{})}
}

func (c *pollDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *pollDeadline) Done() <-chan struct{}       { return c.done }

func (c *pollDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	if c.polls == c.at {
		close(c.done)
	}
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// expire makes the deadline pass now.
func (c *pollDeadline) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
	default:
		close(c.done)
		c.at = -1
	}
}

// stoppedAt is the phase and item index a run's error says it stopped at.
var stoppedAt = regexp.MustCompile(`stopped while (validating|preparing|reading) item (\d+) of (\d+)`)

// TestRunBatchHonoursDeadlineDuringPreparation puts a batch run's deadline
// at every look at the context before the first forward call, in the
// generated EmbedBatch (typed validation, then preparing the inputs) and
// in the untyped runner a server calls (reading the kwargs): wherever the
// deadline passes, the run returns an error matching
// context.DeadlineExceeded, no results and no forward call, having
// prepared at most ItemCheckInterval items after it — "within a fraction
// of one batch's time", counted in items instead of measured on a clock
// (the issue measured 456 ms for 200,000 items before any forward call).
// A deadline that passes during a forward call stops the run before the
// next one.
func TestRunBatchHonoursDeadlineDuringPreparation(t *testing.T) {
	t.Parallel()
	// A copy of the checkpoints: clients cache modules by path, whatever
	// engine loaded them, and this client's must be the fake engine's.
	eng := enginetest.OverDefault(t)
	c, err := tinyencoder.New(client.WithEngine(eng), client.WithCheckpointRoot(tiny.Copy(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := c.Backend().(*client.Client)
	if _, _, err := cc.Load(); err != nil {
		t.Fatal(err)
	}
	ps := make([]tinyencoder.EmbedParams, deadlineItems)
	tok := tensor.FromInt64([]int64{1, 2, 3, 4, 5, 6, 7, 8}, 8)
	for i := range ps {
		ps[i] = tinyencoder.DefaultEmbedParams()
		ps[i].Tokens = tok
	}
	items := make([]map[string]any, deadlineItems)
	for i := range items {
		items[i] = map[string]any{"tokens": tok, "normalize": true}
	}
	typed := func(ctx context.Context) (int, error) {
		res, err := c.EmbedBatch(ctx, ps)
		return len(res), err
	}
	untyped := func(ctx context.Context) (int, error) {
		res, err := cc.RunBatch(ctx, "embed", items)
		return len(res), err
	}

	for _, run := range []struct {
		name   string
		call   func(context.Context) (int, error)
		phases []string // the loops before the first forward call, in order
	}{
		{"EmbedBatch", typed, []string{"validating", "preparing"}},
		{"Client.RunBatch", untyped, []string{"reading", "preparing"}},
	} {
		t.Run(run.name, func(t *testing.T) {
			// Poll k of the run sees the deadline, for k = 1, 2, ...
			// until the run reaches its first forward call.
			last := map[string]int{}
			for k := 1; ; k++ {
				eng.TakeCalls()
				n, err := run.call(newPollDeadline(k))
				calls := len(eng.TakeCalls())
				m := stoppedAt.FindStringSubmatch(fmt.Sprint(err))
				if m == nil {
					// Past the preparation: the run got to its forward
					// calls, and stopped before the first.
					if !errors.Is(err, context.DeadlineExceeded) || n != 0 || calls != 0 {
						t.Fatalf("deadline at poll %d: %d results, %d forward calls, err %v; want a stop before the first forward call", k, n, calls, err)
					}
					break
				}
				phase, item := m[1], atoi(m[2])
				if !errors.Is(err, context.DeadlineExceeded) || n != 0 || calls != 0 || m[3] != strconv.Itoa(deadlineItems) {
					t.Fatalf("deadline at poll %d: %d results, %d forward calls, err %v; want context.DeadlineExceeded and nothing run", k, n, calls, err)
				}
				prev, seen := last[phase]
				if !seen {
					prev = 0
				}
				if item-prev > client.ItemCheckInterval {
					t.Errorf("%s: the deadline passed at item %d and was noticed at item %d", phase, prev, item)
				}
				last[phase] = item
			}
			t.Logf("the last deadline noticed in each loop, by item: %v", last)
			for _, phase := range run.phases {
				if got, ok := last[phase]; !ok || deadlineItems-got > client.ItemCheckInterval {
					t.Errorf("%s: last noticed at item %d (seen %v) of %d; want the deadline looked at to the end", phase, got, ok, deadlineItems)
				}
			}

			// Between forward calls: the deadline passes in the third.
			ctx := newPollDeadline(-1)
			eng.SetOnCall(func(cctx context.Context, call enginetest.Call, next func(context.Context, map[string]any) (any, error)) (any, error) {
				out, err := next(cctx, call.Kwargs)
				if len(eng.Calls()) == 3 {
					ctx.expire()
				}
				return out, err
			})
			defer eng.SetOnCall(nil)
			eng.TakeCalls()
			n, err := run.call(ctx)
			if calls := len(eng.TakeCalls()); !errors.Is(err, context.DeadlineExceeded) || n != 0 || calls != 3 {
				t.Errorf("deadline in the third forward call: %d results, %d forward calls, err %v; want context.DeadlineExceeded after 3 calls", n, calls, err)
			}
		})
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
