package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// wfserve -key-file serves the named keys and rereads the file on SIGHUP:
// a new key works and a removed one is refused, without a restart; a file
// that became wrong leaves the keys in use and says so in the log; the log
// names keys, never their secrets.
func TestKeyFileReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	const oldKey, newKey = "old-secret-0123456789", "new-secret-0123456789"
	file := filepath.Join(t.TempDir(), "keys.yaml")
	write := func(doc string) {
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("keys:\n  - {name: old, key: " + oldKey + "}\n")
	p := startProc(t, "-key-file", file)
	get := func(key string) int {
		req, _ := http.NewRequest("GET", p.url+"/v2/models/tiny-encoder", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(oldKey); c != http.StatusOK {
		t.Fatalf("the file's key: %d", c)
	}
	if c := get(newKey); c != http.StatusUnauthorized {
		t.Fatalf("a key not in the file: %d", c)
	}
	write("keys:\n  - {name: new, key: " + newKey + "}\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	enginetest.WaitFor(t, "the new key to work after SIGHUP", func() bool { return get(newKey) == http.StatusOK })
	if c := get(oldKey); c != http.StatusUnauthorized {
		t.Errorf("the removed key after SIGHUP: %d", c)
	}
	write("keys: [{name: broken}]\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	enginetest.WaitFor(t, "the refused reload in the log", func() bool { return strings.Contains(p.stderr.String(), "keys not reloaded") })
	if c := get(newKey); c != http.StatusOK {
		t.Errorf("the key in use after a wrong file: %d", c)
	}
	if log := p.stderr.String(); strings.Contains(log, oldKey) || strings.Contains(log, newKey) || !strings.Contains(log, "keys reloaded") {
		t.Errorf("the log holds a secret or no reload:\n%s", log)
	}
}

// A second SIGTERM during the drain (a process group's signal that `go
// tool wfserve` relays as well) does not kill wfserve: it finishes the
// drain and exits 0 (it died of the second signal, under `go tool` of Go
// 1.27, in the downstream e2e test).
func TestSecondSIGTERMDuringTheDrain(t *testing.T) {
	t.Parallel()
	p := startProc(t, "-drain-timeout", "30s")
	p.cmd.Process.Signal(syscall.SIGTERM)
	enginetest.WaitFor(t, "the drain to begin", func() bool { return strings.Contains(p.stderr.String(), "shutting down") })
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	if p.exitErr != nil {
		t.Errorf("wfserve after two SIGTERMs: %v\n%s", p.exitErr, p.stderr.String())
	}
}
