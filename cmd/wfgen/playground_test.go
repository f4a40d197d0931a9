package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlayground writes a family's static page, and refuses a call
// without a folder.
func TestPlayground(t *testing.T) {
	dir := t.TempDir()
	manifest, _ := filepath.Abs(filepath.Join("..", "..", "manifests", "worldmodel.yaml"))
	code, out, e := wfgen("playground", "-o", dir, manifest)
	if code != 0 || !strings.Contains(out, "wrote the playground of worldmodel") {
		t.Fatalf("exit %d\n%s%s", code, out, e)
	}
	for _, name := range []string{"index.html", "app.js", "transport.js", "style.css", "families.js"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	js, _ := os.ReadFile(filepath.Join(dir, "families.js"))
	if !strings.Contains(string(js), `"controls":[{"name":"up","keys":["ArrowUp","w"]}`) {
		t.Errorf("families.js has no controls bound to keys: %.300s", js)
	}
	if code, _, e := wfgen("playground", manifest); code != 2 || !strings.Contains(e, "usage: wfgen playground -o DIR") {
		t.Errorf("without -o: exit %d\n%s", code, e)
	}
}
