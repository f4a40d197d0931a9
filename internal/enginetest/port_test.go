package enginetest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The port Port gives lies outside the kernel's ephemeral range, so no
// port-0 bind and no outgoing connection of any process can take it, and
// it is free to bind.
func TestPortIsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	for range 20 {
		p := Port(t)
		if p >= lo && p <= hi {
			t.Fatalf("port %d lies in the ephemeral range %d-%d", p, lo, hi)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("the reserved port: %v", err)
		}
		ln.Close()
	}
}

// A port one test process holds is never given to another until the test
// that reserved it ends: a second process asks for ports while this one
// holds many, and gets none of them.
func TestPortIsReservedAcrossProcesses(t *testing.T) {
	if os.Getenv("WFGEN_PORT_CHILD") != "" {
		var ports []string
		for range 200 {
			ports = append(ports, strconv.Itoa(Port(t)))
		}
		os.Stdout.WriteString(strings.Join(ports, " ") + "\n")
		return
	}
	lo, hi := ephemeralRange()
	held := map[int]bool{}
	// Hold most ports of a small window, so that a child that picked
	// ports at random would hit one of them.
	for len(held) < 2000 {
		held[Port(t)] = true
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, "-test.run=^TestPortIsReservedAcrossProcesses$")
	c.Env = append(os.Environ(), "WFGEN_PORT_CHILD=1")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	if len(lines) != 200 {
		t.Fatalf("child printed %d ports: %s", len(lines), out)
	}
	for _, s := range lines {
		p, _ := strconv.Atoi(s)
		if held[p] {
			t.Errorf("port %d was given to the child while this process held it", p)
		}
		if p >= lo && p <= hi {
			t.Errorf("child's port %d lies in the ephemeral range", p)
		}
	}
}
