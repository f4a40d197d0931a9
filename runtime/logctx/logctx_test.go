package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// records decodes JSON log lines.
func records(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestConfigureIsIdempotentUntilForced(t *testing.T) {
	t.Setenv(logctx.EnvLevel, "")
	t.Setenv(logctx.EnvFormat, "")
	t.Setenv(logctx.EnvContext, "")
	var first, second bytes.Buffer
	changed, err := logctx.Configure(logctx.Options{Writer: &first, Format: logctx.FormatJSON, Force: true})
	if err != nil || !changed {
		t.Fatalf("forced Configure = %v, %v; want true, nil", changed, err)
	}
	changed, err = logctx.Configure(logctx.Options{Writer: &second, Format: logctx.FormatText})
	if err != nil || changed {
		t.Fatalf("second Configure = %v, %v; want false, nil", changed, err)
	}
	slog.Info("hello", "k", 1)
	if second.Len() != 0 {
		t.Fatalf("second Configure without Force installed its writer: %q", second.String())
	}
	recs := records(t, first.Bytes())
	if len(recs) != 1 || recs[0]["msg"] != "hello" {
		t.Fatalf("records = %v", recs)
	}
	if tm, _ := recs[0]["time"].(string); !strings.HasSuffix(tm, "Z") {
		t.Errorf("record time %q is not UTC", tm)
	}
	changed, err = logctx.Configure(logctx.Options{Writer: &second, Format: logctx.FormatText, Force: true})
	if err != nil || !changed {
		t.Fatalf("forced reconfigure = %v, %v", changed, err)
	}
	slog.Info("again")
	if !strings.Contains(second.String(), "msg=again") {
		t.Fatalf("text output after forced reconfigure: %q", second.String())
	}
	if logctx.Logger() != slog.Default() {
		t.Error("Logger() is not the installed default logger")
	}
}

func TestConfigureReadsLevelAndFormatFromEnv(t *testing.T) {
	t.Setenv(logctx.EnvLevel, "WARNING")
	t.Setenv(logctx.EnvFormat, "JSON")
	t.Setenv(logctx.EnvContext, "")
	var buf bytes.Buffer
	if _, err := logctx.Configure(logctx.Options{Writer: &buf, Force: true}); err != nil {
		t.Fatal(err)
	}
	slog.Info("dropped")
	slog.Warn("kept")
	recs := records(t, buf.Bytes())
	if len(recs) != 1 || recs[0]["msg"] != "kept" || recs[0]["level"] != "WARN" {
		t.Fatalf("records = %v; want only the WARN record", recs)
	}
}

func TestConfigureRejectsBadEnvAndKeepsPreviousSetup(t *testing.T) {
	t.Setenv(logctx.EnvLevel, "")
	t.Setenv(logctx.EnvFormat, "")
	t.Setenv(logctx.EnvContext, "")
	var good bytes.Buffer
	if _, err := logctx.Configure(logctx.Options{Writer: &good, Format: logctx.FormatJSON, Force: true}); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ env, value, want string }{
		{logctx.EnvLevel, "verbose", logctx.EnvLevel},
		{logctx.EnvFormat, "xml", logctx.EnvFormat},
		{logctx.EnvContext, "[1,2]", logctx.EnvContext},
		{logctx.EnvContext, "{bad", logctx.EnvContext},
	}
	for _, c := range cases {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			var bad bytes.Buffer
			changed, err := logctx.Configure(logctx.Options{Writer: &bad, Force: true})
			if err == nil || changed || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Configure = %v, %v; want an error naming %s", changed, err, c.want)
			}
			slog.Info("still here")
			if bad.Len() != 0 || !strings.Contains(good.String(), "still here") {
				t.Fatalf("failed Configure changed the pipeline (bad=%q)", bad.String())
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	good := map[string]slog.Level{
		"": slog.LevelInfo, "debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn,
		"warning": slog.LevelWarn, "error": slog.LevelError, "critical": slog.LevelError + 4,
		"info+2": slog.LevelInfo + 2, "-8": -8, " 12 ": 12,
	}
	for in, want := range good {
		got, err := logctx.ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"verbose", "info+", "1.5", "debugx"} {
		if _, err := logctx.ParseLevel(in); err == nil {
			t.Errorf("ParseLevel(%q) succeeded; want an error", in)
		}
	}
}

// TestLevelNumbersAreSlogs: WORLDFOUNDRY_LOG_LEVEL's names mean the same in
// Go and Python (debug, info, warning, error, critical), but a number is a
// slog level in Go — -4 debug, 0 info, 4 warn, 8 error, 12 critical — and a
// logging level in Python — 10 DEBUG, 20 INFO, 30 WARNING, 40 ERROR, 50
// CRITICAL (docs/differences.md). Every Python number is above Go's error
// (Python's 10, DEBUG, is ERROR+2 here), so a number meant for Python
// silences a Go process.
func TestLevelNumbersAreSlogs(t *testing.T) {
	for _, c := range []struct {
		name, number string
	}{{"debug", "-4"}, {"info", "0"}, {"warning", "4"}, {"error", "8"}, {"critical", "12"}} {
		byName, err1 := logctx.ParseLevel(c.name)
		byNumber, err2 := logctx.ParseLevel(c.number)
		if err1 != nil || err2 != nil || byName != byNumber {
			t.Errorf("%s = %v, %s = %v (%v, %v); want the same level", c.name, byName, c.number, byNumber, err1, err2)
		}
	}
	for _, python := range []string{"10", "20", "30", "40", "50"} {
		l, err := logctx.ParseLevel(python)
		if err != nil || l <= slog.LevelError {
			t.Errorf("ParseLevel(%q) = %v, %v; want a slog level above error, not Python's meaning", python, l, err)
		}
	}
}

func TestFieldsFlowIntoEveryRecord(t *testing.T) {
	logctx.SetProcessFields(logctx.Fields{"run_id": "proc-run", "host_role": "ctl"})
	t.Cleanup(func() { logctx.SetProcessFields(nil) })
	var buf bytes.Buffer
	log := slog.New(logctx.NewHandler(slog.NewJSONHandler(&buf, nil)))

	base := context.Background()
	outer := logctx.With(base, logctx.Fields{"run_id": "r1", "rank": 3, "ratio": 0.5, "ok": true, "": "ignored"})
	err := logctx.Scope(outer, logctx.Fields{"request_id": "q9", "rank": 4}, func(ctx context.Context) error {
		log.InfoContext(ctx, "inner")
		return errors.New("boom")
	})
	if err == nil || err.Error() != "boom" {
		t.Fatalf("Scope did not return fn's error: %v", err)
	}
	log.InfoContext(outer, "outer")
	log.Info("bare")

	recs := records(t, buf.Bytes())
	if len(recs) != 3 {
		t.Fatalf("got %d records", len(recs))
	}
	check := func(rec map[string]any, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("record %q: %s = %v (%T); want %v", rec["msg"], k, rec[k], rec[k], v)
			}
		}
	}
	check(recs[0], map[string]any{"run_id": "r1", "rank": 4.0, "request_id": "q9", "ratio": 0.5, "ok": true, "host_role": "ctl"})
	check(recs[1], map[string]any{"run_id": "r1", "rank": 3.0})
	if _, ok := recs[1]["request_id"]; ok {
		t.Error("scoped field leaked out of Scope")
	}
	check(recs[2], map[string]any{"run_id": "proc-run"})
	if _, ok := recs[0][""]; ok {
		t.Error("empty key was bound")
	}
	if got := logctx.FromContext(base); !cmp.Equal(got, logctx.Fields{"run_id": "proc-run", "host_role": "ctl"}) {
		t.Errorf("parent context changed: %v", got)
	}
}

func TestHandlerWithAttrsAndGroupKeepsFields(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logctx.NewHandler(slog.NewJSONHandler(&buf, nil))).With("svc", "gen").WithGroup("g")
	log.InfoContext(logctx.With(context.Background(), logctx.Fields{"run_id": "r2"}), "m", "a", 1)
	recs := records(t, buf.Bytes())
	g, _ := recs[0]["g"].(map[string]any)
	if recs[0]["svc"] != "gen" || g["run_id"] != "r2" || g["a"] != 1.0 {
		t.Fatalf("record = %v", recs[0])
	}
}

func TestEnvRoundTrip(t *testing.T) {
	type custom struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	ctx := logctx.With(context.Background(), logctx.Fields{
		"run_id": "r1", "rank": 2, "big": uint64(1 << 40), "f": 1.25, "whole": 2.0, "ok": false,
		"dur": 1500 * time.Millisecond, "obj": custom{A: 1, B: "x"}, "list": []int{1, 2}, "nil": nil,
		"nan": math.NaN(), "err": errors.New("bad"),
	})
	enc := logctx.EncodeEnv(ctx)
	got, err := logctx.DecodeEnv(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := logctx.FromContext(ctx)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("DecodeEnv(EncodeEnv) differs (-want +got):\n%s", diff)
	}
	if got["dur"] != "1.5s" || got["whole"] != int64(2) || got["nan"] != "NaN" || got["err"] != "bad" {
		t.Errorf("normalised values: %v", got)
	}

	env := logctx.AppendEnv([]string{"A=1", logctx.EnvContext + "=stale", "B=2"}, ctx)
	var n int
	for _, kv := range env {
		if strings.HasPrefix(kv, logctx.EnvContext+"=") {
			n++
			if kv != logctx.EnvContext+"="+enc {
				t.Errorf("env entry %q", kv)
			}
		}
	}
	if n != 1 || len(env) != 3 {
		t.Errorf("AppendEnv = %v", env)
	}
	if env := logctx.AppendEnv([]string{logctx.EnvContext + "=stale"}, context.Background()); len(env) != 0 {
		t.Errorf("no fields should drop a stale entry, got %v", env)
	}
}

func TestDecodeEnvErrors(t *testing.T) {
	for _, in := range []string{"null", "[]", `"s"`, "1", "{", `{"a":1} x`, `{"":1}`, `{"a":1e999}`} {
		if _, err := logctx.DecodeEnv(in); err == nil || !strings.Contains(err.Error(), logctx.EnvContext) {
			t.Errorf("DecodeEnv(%q) error = %v; want one naming %s", in, err, logctx.EnvContext)
		}
	}
	if f, err := logctx.DecodeEnv("  "); err != nil || len(f) != 0 {
		t.Errorf("blank value: %v, %v", f, err)
	}
}

// TestChildRestoresParentFields runs this test binary as a child with the
// parent's fields in its environment and reads the child's JSON records.
func TestChildRestoresParentFields(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "run-42", "rank": 1})
	cmd := exec.Command(exe)
	cmd.Env = logctx.AppendEnv(append(os.Environ(), helperEnv+"=log", logctx.EnvLevel+"=info"), ctx)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	recs := records(t, out)
	if len(recs) != 2 {
		t.Fatalf("child wrote %d records: %s", len(recs), out)
	}
	for _, r := range recs {
		if r["run_id"] != "run-42" || r["rank"] != 1.0 {
			t.Errorf("child record lacks the parent's fields: %v", r)
		}
	}
	if recs[1]["step"] != "child-step" {
		t.Errorf("child's own field missing: %v", recs[1])
	}
}

// TestNowUTC runs in a synctest bubble, whose clock stands still: NowUTC
// must be exactly the bubble's now.
func TestNowUTC(t *testing.T) { synctest.Test(t, testNowUTC) }

func testNowUTC(t *testing.T) {
	s := logctx.NowUTC()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("NowUTC() = %q: %v", s, err)
	}
	if !strings.HasSuffix(s, "Z") || len(s) != len("2006-01-02T15:04:05.000000Z") {
		t.Errorf("NowUTC() = %q; want fixed-width UTC", s)
	}
	if now := time.Now(); !tm.Equal(now.Truncate(time.Microsecond)) {
		t.Errorf("NowUTC() = %q; want now, %v", s, now)
	}
	loc := time.FixedZone("X", 5*3600)
	if got := logctx.FormatUTC(time.Date(2024, 2, 3, 10, 0, 0, 1500, loc)); got != "2024-02-03T05:00:00.000001Z" {
		t.Errorf("FormatUTC = %q", got)
	}
}

// BenchmarkHandler compares a JSON record with and without the correlation
// handler (three context fields).
func BenchmarkHandler(b *testing.B) {
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "r1", "rank": 3, "model": "tiny"})
	for _, wrap := range []bool{false, true} {
		name := map[bool]string{false: "plain-json", true: "logctx-json"}[wrap]
		b.Run(name, func(b *testing.B) {
			var h slog.Handler = slog.NewJSONHandler(io.Discard, nil)
			if wrap {
				h = logctx.NewHandler(h)
			}
			log := slog.New(h)
			b.ReportAllocs()
			for b.Loop() {
				log.InfoContext(ctx, "step done", "n", 1)
			}
		})
	}
}
