package logctx_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// helperEnv selects a child role when the test binary re-executes itself.
const helperEnv = "WFGEN_LOGCTX_TEST_HELPER"

func TestMain(m *testing.M) {
	switch role := os.Getenv(helperEnv); role {
	case "":
		os.Exit(m.Run())
	case "log":
		os.Exit(helperLog())
	case "append":
		os.Exit(helperAppend())
	default:
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
		os.Exit(2)
	}
}

// helperLog configures logging from the environment (restoring the parent's
// fields) and writes two JSON records to stdout.
func helperLog() int {
	if _, err := logctx.Configure(logctx.Options{Writer: os.Stdout, Format: logctx.FormatJSON}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	slog.Info("child started")
	ctx := logctx.With(context.Background(), logctx.Fields{"step": "child-step"})
	slog.InfoContext(ctx, "child working", "n", 1)
	return 0
}

// helperAppend appends HELPER_COUNT events with a payload of HELPER_SIZE
// bytes to HELPER_PATH, tagged with HELPER_WRITER and a sequence number.
func helperAppend() int {
	path := os.Getenv("HELPER_PATH")
	n, _ := strconv.Atoi(os.Getenv("HELPER_COUNT"))
	size, _ := strconv.Atoi(os.Getenv("HELPER_SIZE"))
	writer := os.Getenv("HELPER_WRITER")
	if _, err := logctx.RestoreFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pad := strings.Repeat(writer[:1], size)
	for i := range n {
		err := logctx.AppendEvent(context.Background(), path, "tick", map[string]any{"writer": writer, "seq": i, "pad": pad})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}
