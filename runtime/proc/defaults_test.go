//go:build linux

package proc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunDefaults checks the process defaults that differ from the seed's
// (docs/differences.md): a grace of 5 s between SIGTERM and SIGKILL (the
// seed's terminate_process_group waits 3 s), and tails of 64 KiB and 200
// lines (the seed's read_text_tail keeps 20 lines) — the values, and that
// Run applies them when a Command leaves them 0.
func TestRunDefaults(t *testing.T) {
	t.Parallel()
	if DefaultGrace != 5*time.Second || DefaultTailBytes != 64<<10 || DefaultTailLines != 200 {
		t.Errorf("defaults: grace %v, tail %d bytes / %d lines; want 5s, 64 KiB / 200", DefaultGrace, DefaultTailBytes, DefaultTailLines)
	}

	// 300 short lines: the tail is the last 200.
	res, err := Run(context.Background(), selfCommand(t, "lines", linesEnv+"=300 10"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(res.StdoutTail, "\n")
	if len(lines) != DefaultTailLines || !strings.HasPrefix(lines[0], "000100") || !strings.HasPrefix(lines[len(lines)-1], "000299") {
		t.Errorf("tail of 300 lines: %d lines, %q … %q", len(lines), lines[0], lines[len(lines)-1])
	}
	// 100 lines of 1 KiB: the tail is the whole lines of the last 64 KiB.
	res, err = Run(context.Background(), selfCommand(t, "lines", linesEnv+"=100 1024"))
	if err != nil {
		t.Fatal(err)
	}
	// (The window starts at byte 36 Ki, a line start.)
	if n := len(res.StdoutTail); n > int(DefaultTailBytes) || strings.Count(res.StdoutTail, "\n") != 63 || !strings.HasPrefix(res.StdoutTail, "000036") {
		t.Errorf("tail of 100 KiB: %d bytes, %d lines, starting %q; want the last 64 lines", n, strings.Count(res.StdoutTail, "\n")+1, res.StdoutTail[:min(10, n)])
	}

	// A cancelled run terminates with the default grace, as its lifecycle
	// file records (the sleeper dies at SIGTERM, so nothing waits 5 s).
	reportPath := filepath.Join(t.TempDir(), "report")
	cleanup(t, &reportPath)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitReports(t, reportPath, 1)
		cancel()
	}()
	res, _ = Run(ctx, selfCommand(t, "sleeper", reportEnv+"="+reportPath))
	if e := findEvent(t, events(t, res.LifecyclePath), "terminating"); e.Data["grace_ms"] != DefaultGrace.Milliseconds() {
		t.Errorf("terminating event grace_ms = %v, want %d", e.Data["grace_ms"], DefaultGrace.Milliseconds())
	}
}
