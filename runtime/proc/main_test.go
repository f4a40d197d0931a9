//go:build linux

package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// Environment variables of the helper processes: this test binary
// re-executed with a role.
const (
	roleEnv   = "WFGEN_PROC_TEST_ROLE"
	reportEnv = "WFGEN_PROC_TEST_REPORT" // file each helper appends "role pid start" to
	escapeEnv = "WFGEN_PROC_TEST_ESCAPE" // "0": the tree has no grandchild in its own session
	bytesEnv  = "WFGEN_PROC_TEST_BYTES"  // how much the writer writes
	codeEnv   = "WFGEN_PROC_TEST_CODE"   // exit code of the exit role
	linesEnv  = "WFGEN_PROC_TEST_LINES"  // "N L": the lines role writes N numbered lines of L bytes
)

// helperLife bounds how long a helper sleeps, so nothing leaks for long if
// a test dies before cleaning up.
const helperLife = 90 * time.Second

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	os.Exit(runHelper(role))
}

func runHelper(role string) int {
	switch role {
	case "sleeper":
		report(role)
		time.Sleep(helperLife)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		report(role)
		time.Sleep(helperLife)
	case "escaper":
		report(role)
		spawn("sleeper", false)
		time.Sleep(helperLife)
	case "tree":
		// A child with grandchildren: one plain, one that ignores SIGTERM,
		// and (unless escapeEnv=0) one in its own session with a child.
		report(role)
		spawn("sleeper", false)
		spawn("stubborn", false)
		if os.Getenv(escapeEnv) != "0" {
			spawn("escaper", true)
		}
		fmt.Println("ready")
		time.Sleep(helperLife)
	case "daemonize":
		// Leaves a grandchild running in its process group and exits.
		report(role)
		spawn("sleeper", false)
		// Exit only once the grandchild has reported itself.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, _ := os.ReadFile(os.Getenv(reportEnv)); bytes.Count(b, []byte("\n")) >= 2 {
				return 0
			}
		}
		return 4
	case "exit":
		fmt.Print("hello\nfrom stdout\n")
		fmt.Fprint(os.Stderr, "oops\n")
		if p := os.Getenv(EnvLifecycle); p != "" {
			ctx := logctx.With(context.Background(), logctx.Fields{"step": "child"})
			_, _ = logctx.RestoreFromEnv()
			if err := logctx.AppendEvent(ctx, p, "child_note", map[string]any{"note": "written by the child"}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 100
			}
		}
		code, _ := strconv.Atoi(os.Getenv(codeEnv))
		return code
	case "write":
		n, _ := strconv.ParseInt(os.Getenv(bytesEnv), 10, 64)
		fmt.Fprint(os.Stderr, "writer starting\n")
		if err := writePattern(os.Stdout, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "lines":
		var n, l int
		fmt.Sscan(os.Getenv(linesEnv), &n, &l)
		w := bufio.NewWriter(os.Stdout)
		for i := range n {
			line := fmt.Sprintf("%06d", i)
			fmt.Fprintf(w, "%s%s\n", line, strings.Repeat(".", max(0, l-len(line)-1)))
		}
		w.Flush()
	case "log":
		if _, err := logctx.Configure(logctx.Options{Writer: os.Stdout, Format: logctx.FormatJSON}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		slog.Info("child started")
		slog.InfoContext(logctx.With(context.Background(), logctx.Fields{"phase": "work"}), "child working")
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	}
	return 0
}

// report appends "role pid start" for this process to the report file.
func report(role string) {
	path := os.Getenv(reportEnv)
	if path == "" {
		return
	}
	p, ok := readProc(os.Getpid())
	if !ok {
		fmt.Fprintln(os.Stderr, "cannot read /proc/self/stat")
		os.Exit(3)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %d %d\n", role, p.pid, p.start)
}

// spawn starts this binary in another role, optionally in a new session.
func spawn(role string, newSession bool) {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if newSession {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	go cmd.Wait() // reap it if it dies first
}

// Pattern of the writer role: 4 MiB blocks of 64-byte lines, then
// patternTail.
const (
	patternBlock = 4 << 20
	patternTail  = "tail line 1\ntail line 2\nlast line: ünïcödé ✓\n"
)

func patternBlockBytes() []byte {
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.\n")
	return bytes.Repeat(line, patternBlock/len(line))
}

// writePattern writes n bytes of blocks (n must be a multiple of
// patternBlock) and then patternTail.
func writePattern(w *os.File, n int64) error {
	block := patternBlockBytes()
	for written := int64(0); written < n; written += patternBlock {
		if _, err := w.Write(block); err != nil {
			return err
		}
	}
	_, err := w.Write([]byte(patternTail))
	return err
}
