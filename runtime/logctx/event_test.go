package logctx_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

func TestAppendEventWritesSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "run.lifecycle.jsonl")
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "r7"})
	if err := logctx.AppendEvent(ctx, path, "started", map[string]any{"child_pid": 12}); err != nil {
		t.Fatal(err)
	}
	if err := logctx.AppendEvent(nil, path, "exited", nil); err != nil {
		t.Fatal(err)
	}
	evs, err := logctx.ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("got %d events", len(evs))
	}
	e := evs[0]
	if e.Schema != logctx.EventSchema || e.Event != "started" || e.PID != os.Getpid() || e.Context["run_id"] != "r7" || e.Data["child_pid"] != int64(12) {
		t.Errorf("event = %+v", e)
	}
	if !strings.HasSuffix(e.Time, "Z") {
		t.Errorf("time %q not UTC", e.Time)
	}
	if evs[1].Event != "exited" || evs[1].Data != nil || evs[1].Context != nil {
		t.Errorf("second event = %+v", evs[1])
	}
	raw, _ := os.ReadFile(path)
	if bytes.Count(raw, []byte("\n")) != 2 || !bytes.HasPrefix(raw, []byte(`{"schema":"`+logctx.EventSchema+`","time":"`)) {
		t.Errorf("file:\n%s", raw)
	}
}

func TestAppendEventRejectsBadInputAndWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	if err := logctx.AppendEvent(context.Background(), path, "e", map[string]any{"v": math.NaN()}); err == nil {
		t.Fatal("NaN data accepted")
	}
	if err := logctx.AppendEvent(context.Background(), path, "e", map[string]any{"c": make(chan int)}); err == nil {
		t.Fatal("channel data accepted")
	}
	if err := logctx.AppendEvent(context.Background(), path, "", nil); err == nil {
		t.Fatal("empty event name accepted")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file exists after rejected events: %v", err)
	}
}

// TestAppendEventConcurrentProcesses has several processes and goroutines
// append lines longer than PIPE_BUF to one file at once, then checks every
// line is a whole event and no event is lost.
func TestAppendEventConcurrentProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shared.jsonl")
	const procs, perProc, size = 4, 150, 20 << 10 // 20 KiB payloads: 5× PIPE_BUF
	var cmds []*exec.Cmd
	for i := range procs {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), helperEnv+"=append", "HELPER_PATH="+path,
			fmt.Sprintf("HELPER_COUNT=%d", perProc), fmt.Sprintf("HELPER_SIZE=%d", size),
			fmt.Sprintf("HELPER_WRITER=%c%d", 'a'+i, i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			w := fmt.Sprintf("%c%d", 'x'+g, g)
			pad := strings.Repeat(w[:1], size)
			for i := range perProc {
				if err := logctx.AppendEvent(context.Background(), path, "tick", map[string]any{"writer": w, "seq": i, "pad": pad}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	evs, err := logctx.ReadEvents(path)
	if err != nil {
		t.Fatalf("file has a torn or interleaved line: %v", err)
	}
	if len(evs) != (procs+2)*perProc {
		t.Fatalf("got %d events; want %d", len(evs), (procs+2)*perProc)
	}
	next := map[string]int64{}
	for _, e := range evs {
		w, _ := e.Data["writer"].(string)
		pad, _ := e.Data["pad"].(string)
		if len(pad) != size || strings.Trim(pad, w[:1]) != "" {
			t.Fatalf("writer %s: payload corrupted", w)
		}
		if seq := e.Data["seq"]; seq != next[w] {
			t.Fatalf("writer %s: seq %v; want %d (lines reordered or lost)", w, seq, next[w])
		}
		next[w]++
	}
	if len(next) != procs+2 {
		t.Fatalf("saw %d writers", len(next))
	}
}

func TestDecodeEventsErrors(t *testing.T) {
	good := `{"schema":"s","time":"t","event":"e","pid":1}`
	cases := map[string]string{
		"torn last line": good + "\n" + `{"schema":"s","ti`,
		"not json":       "nope\n",
		"array":          "[1]\n",
		"no event":       `{"schema":"s","time":"t","pid":1}` + "\n",
		"bad pid":        `{"schema":"s","time":"t","event":"e","pid":-1}` + "\n",
		"bad context":    `{"schema":"s","time":"t","event":"e","pid":1,"context":[]}` + "\n",
		"bad data":       `{"schema":"s","time":"t","event":"e","pid":1,"data":3}` + "\n",
	}
	for name, in := range cases {
		if _, err := logctx.DecodeEvents(strings.NewReader(in), "f.jsonl"); err == nil || !strings.Contains(err.Error(), "f.jsonl:") {
			t.Errorf("%s: error = %v; want one naming f.jsonl:LINE", name, err)
		}
	}
	evs, err := logctx.DecodeEvents(strings.NewReader(good+"\r\n\n"+good+"\n"), "f")
	if err != nil || len(evs) != 2 {
		t.Errorf("good input: %v, %v", evs, err)
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	for _, size := range []int{64, 16 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.jsonl")
			data := map[string]any{"pad": strings.Repeat("p", size), "child_pid": 1234}
			ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "bench"})
			b.ReportAllocs()
			for b.Loop() {
				if err := logctx.AppendEvent(ctx, path, "tick", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
