package enginetest

import (
	"os"
	"os/exec"
	"testing"
)

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
