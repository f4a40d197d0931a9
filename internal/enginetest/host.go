package enginetest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// FreePort returns a loopback port nothing listens on now, for a process a
// test starts that must be told its port (a server, a load balancer, a
// rendezvous).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Tool returns the path of a program the test runs — name on PATH, else
// at path (Debian puts some in /usr/sbin, which not every PATH has) — or
// skips the test, saying how to install it.
func Tool(t testing.TB, name, path, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	t.Skipf("%s is not installed (%s)", name, install)
	return ""
}
