package enginetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Port reserves a loopback port for a program the test starts that must be
// told its port before it binds — a load balancer, Prometheus, a c10d store,
// a torchrun rendezvous — and returns it. Servers of this project (wfserve)
// bind port 0 and report the address they got instead; use Port only where
// that cannot be done.
//
// A port picked by binding port 0 and closing it races every other process
// on the machine: the kernel hands the same port to the next socket that
// binds port 0 or connects out, which another test binary may open before
// the child binds it (seen in CI: "bind: address already in use"). Port
// therefore picks from outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands out, and
// holds a lock on the port until the test ends — an abstract Unix socket
// named after it, which every test process of this module sees and which
// the kernel releases when the process dies, so nothing is left on disk —
// so that no other test process reserves it meanwhile.
func Port(t testing.TB) int {
	t.Helper()
	lo, hi := ephemeralRange()
	candidates := portsOutside(lo, hi)
	if len(candidates) == 0 {
		t.Fatalf("no loopback port lies outside the ephemeral range %d-%d", lo, hi)
	}
	start := rand.IntN(len(candidates))
	for i := range candidates {
		port := candidates[(start+i)%len(candidates)]
		lock, err := net.Listen("unix", "@"+portLockName(port))
		if err != nil {
			continue // another test process holds it
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lock.Close() // some program outside the tests listens there
			continue
		}
		ln.Close()
		t.Cleanup(func() { lock.Close() })
		return port
	}
	t.Fatalf("every loopback port outside the ephemeral range %d-%d is taken", lo, hi)
	return 0
}

// portLockName is the abstract Unix socket that marks port as reserved by
// a test process.
func portLockName(port int) string { return fmt.Sprintf("wfgen-test-port-%d", port) }

// ephemeralRange is the kernel's range of ports for port-0 binds and
// outgoing connections; Linux's default when it cannot be read.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}

// portsOutside lists the ports from 20000 to 65535 outside [lo, hi]
// (below 20000 live the fixed ports of well-known servers, torchrun's
// 29400 aside).
func portsOutside(lo, hi int) []int {
	var ports []int
	for p := 20000; p <= 65535; p++ {
		if (p < lo || p > hi) && p != 29400 {
			ports = append(ports, p)
		}
	}
	return ports
}
