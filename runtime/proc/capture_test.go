//go:build linux

package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// heapPeak samples the heap until stop is called and returns the highest
// HeapAlloc seen above the baseline taken at the start.
func heapPeak() (stop func() (peakGrowth uint64, allocated uint64)) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, baseTotal := ms.HeapAlloc, ms.TotalAlloc
	var peak atomic.Uint64
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	})
	return func() (uint64, uint64) {
		close(quit)
		wg.Wait()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p := peak.Load()
		if p < base {
			p = base
		}
		return p - base, ms.TotalAlloc - baseTotal
	}
}

// countingWriter counts bytes and keeps the last 256.
type countingWriter struct {
	n    int64
	last []byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.last = append(w.last, p...)
	if len(w.last) > 256 {
		w.last = append(w.last[:0], w.last[len(w.last)-256:]...)
	}
	return len(p), nil
}

// TestRunGiBOfStdout has a child write 1 GiB to stdout, straight to the
// capture file and through the tee pipe, and checks the parent's heap stays
// bounded, the tail is right and the capture is complete.
func TestRunGiBOfStdout(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB twice; skipped with -short")
	}
	const size = 1 << 30
	want := int64(size + len(patternTail))
	for _, tee := range []bool{false, true} {
		t.Run(fmt.Sprintf("tee=%v", tee), func(t *testing.T) {
			c := selfCommand(t, "write", fmt.Sprintf("%s=%d", bytesEnv, size))
			c.TailLines = 3
			var cw countingWriter
			if tee {
				c.Stdout = &cw
			}
			stop := heapPeak()
			start := time.Now()
			res, err := Run(context.Background(), c)
			growth, allocated := stop()
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			t.Logf("1 GiB via %s in %v: peak heap growth %.2f MiB, allocated %.2f MiB",
				map[bool]string{false: "direct file", true: "tee pipe"}[tee], time.Since(start).Round(time.Millisecond),
				float64(growth)/(1<<20), float64(allocated)/(1<<20))
			if growth > 64<<20 {
				t.Errorf("parent heap grew %d bytes; want < 64 MiB", growth)
			}
			if want := strings.TrimSuffix(patternTail, "\n"); res.StdoutTail != want {
				t.Errorf("tail = %q; want %q", res.StdoutTail, want)
			}
			if res.StderrTail != "writer starting" {
				t.Errorf("stderr tail = %q", res.StderrTail)
			}
			if res.StdoutBytes != want {
				t.Errorf("StdoutBytes = %d; want %d", res.StdoutBytes, want)
			}
			verifyPattern(t, res.StdoutPath, size)
			if tee && (cw.n != want || !bytes.HasSuffix(cw.last, []byte(patternTail))) {
				t.Errorf("tee got %d bytes ending %q; want %d", cw.n, cw.last, want)
			}
			evs := events(t, res.LifecyclePath)
			if e := findEvent(t, evs, "exited"); e.Data["stdout_bytes"] != want {
				t.Errorf("exited = %+v", e.Data)
			}
			if err := os.Remove(res.StdoutPath); err != nil {
				t.Error(err)
			}
		})
	}
}

// verifyPattern reads the capture back and compares it with what the
// writer role writes.
func verifyPattern(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if st.Size() != size+int64(len(patternTail)) {
		t.Fatalf("capture is %d bytes; want %d", st.Size(), size+int64(len(patternTail)))
	}
	block := patternBlockBytes()
	buf := make([]byte, len(block))
	for off := int64(0); off < size; off += int64(len(block)) {
		if _, err := io.ReadFull(f, buf); err != nil {
			t.Fatalf("at %d: %v", off, err)
		}
		if !bytes.Equal(buf, block) {
			t.Fatalf("capture differs in the block at offset %d", off)
		}
	}
	rest, err := io.ReadAll(f)
	if err != nil || string(rest) != patternTail {
		t.Fatalf("capture ends %q, %v", rest, err)
	}
}

// TestRunCorrelationReachesChildLogs: fields bound in the parent travel
// through the environment and appear in every record the child logs.
func TestRunCorrelationReachesChildLogs(t *testing.T) {
	t.Parallel()
	c := selfCommand(t, "log", logctx.EnvLevel+"=info")
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "run-77", "rank": 0, "model": "tiny"})
	res, err := Run(ctx, c)
	if err != nil || !res.Success() {
		t.Fatalf("Run = %+v, %v\n%s", res, err, res.StderrTail)
	}
	lines := strings.Split(res.StdoutTail, "\n")
	if len(lines) != 2 {
		t.Fatalf("child logged %q", res.StdoutTail)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("child record %q: %v", l, err)
		}
		if rec["run_id"] != "run-77" || rec["rank"] != 0.0 || rec["model"] != "tiny" {
			t.Errorf("child record lacks the parent's fields: %v", rec)
		}
	}
	if !strings.Contains(lines[1], `"phase":"work"`) {
		t.Errorf("child's own field missing: %s", lines[1])
	}
}

func TestRunStartFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, err := Run(context.Background(), Command{Path: filepath.Join(dir, "no-such-program"), LogDir: dir, Name: "x"})
	if err == nil || res == nil || res.PID != 0 || res.Success() {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	evs := events(t, res.LifecyclePath)
	if len(evs) != 1 || evs[0].Event != "start_failed" || !strings.Contains(fmt.Sprint(evs[0].Data["error"]), "no such file") {
		t.Fatalf("events = %+v", evs)
	}
}

func TestRunRejectsBadCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string]Command{
		"no path":       {LogDir: dir},
		"no log dir":    {Path: "/bin/true"},
		"slash in name": {Path: "/bin/true", LogDir: dir, Name: "a/b"},
		"dot name":      {Path: "/bin/true", LogDir: dir, Name: ".."},
		"neg timeout":   {Path: "/bin/true", LogDir: dir, Timeout: -1},
		"neg tail":      {Path: "/bin/true", LogDir: dir, TailLines: -1},
	}
	for name, c := range cases {
		if res, err := Run(context.Background(), c); err == nil || res != nil {
			t.Errorf("%s: Run = %v, %v; want an error and no result", name, res, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("rejected commands left files: %v", entries)
	}
}

func TestRunAlreadyCanceledContext(t *testing.T) {
	t.Parallel()
	c := selfCommand(t, "sleeper")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, c)
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %+v, %v; want no result and context.Canceled", res, err)
	}
	if entries, _ := os.ReadDir(c.LogDir); len(entries) != 0 {
		t.Errorf("a run that never started left files: %v", entries)
	}
}
