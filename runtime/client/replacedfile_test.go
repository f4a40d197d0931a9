package client_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// A checkpoint replaced by another file of the same size and modification
// time (an image layer or archive with normalised times, cp -p, rsync -t)
// is loaded anew while a client still holds the old one's module: the
// module cache tells files apart by identity (the inode), not only by
// path, size and time — else a server's reload would serve the old
// weights under the new revision.
func TestReplacedCheckpointIsLoadedAnew(t *testing.T) {
	dir := tiny.Copy(t)
	path := filepath.Join(dir, "checkpoints", "tiny-encoder.pt")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.OverDefault(t)
	load := func() *client.Client {
		t.Helper()
		c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointPath(path), client.WithDevice("cpu"), client.WithEngine(eng))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Load(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := load()
	defer old.Close()
	// The same bytes under a new inode, with the old size and time.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, time.Time{}, st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	again := load()
	defer again.Close()
	if n := len(eng.Loads()); n != 2 {
		t.Errorf("%d loads: the replaced file got the old file's cached module", n)
	}
}
