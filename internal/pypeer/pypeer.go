// Package pypeer runs the Python side of a side-by-side benchmark: a
// process of Debian's python3 (the interpreter that has python3-torch)
// that prints a first line starting with "ready" and then answers each
// request line it reads with one line, the nanoseconds its work took.
package pypeer

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Python is Debian's interpreter, which imports python3-torch (the python3
// first on PATH may not).
const Python = "/usr/bin/python3"

// Peer is a running Python peer; it ends with the test or benchmark that
// started it.
type Peer struct {
	name string
	in   io.WriteCloser
	out  *bufio.Scanner
	// Ready is what the peer printed after "ready" on its first line
	// (trimmed), such as its torch thread count.
	Ready string
}

// Start runs Python with args — a script and its arguments, or "-c" and a
// program — as the peer called name in messages. It skips tb when Python
// cannot import torch, and fails it when the peer does not print its
// "ready" line.
func Start(tb testing.TB, name string, args ...string) *Peer {
	tb.Helper()
	if err := exec.Command(Python, "-c", "import torch").Run(); err != nil {
		tb.Skipf("%s cannot import torch (%v): install python3-torch for the Python peer (scripts/setup.sh)", Python, err)
	}
	cmd := exec.Command(Python, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(); cmd.Wait() })
	p := &Peer{name: name, in: in, out: bufio.NewScanner(stdout)}
	if !p.out.Scan() || !strings.HasPrefix(p.out.Text(), "ready") {
		in.Close()
		cmd.Wait()
		tb.Fatalf("%s did not start: %q %v\n%s", name, p.out.Text(), p.out.Err(), stderr.String())
	}
	p.Ready = strings.TrimSpace(strings.TrimPrefix(p.out.Text(), "ready"))
	return p
}

// Time sends one request line and returns the time the peer answered it
// took.
func (p *Peer) Time(request string) (time.Duration, error) {
	if _, err := fmt.Fprintln(p.in, request); err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("%s ended: %v", p.name, p.out.Err())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s answered %q: %w", p.name, p.out.Text(), err)
	}
	return time.Duration(ns), nil
}
