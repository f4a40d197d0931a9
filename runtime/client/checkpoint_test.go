package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveCheckpointOrder(t *testing.T) {
	mdir, root := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "ck/a.pt"), "root")
	ref := spec.InferenceCheckpointRef{Role: "model", URI: "ck/a.pt"}

	got, err := ResolveCheckpoint(ref, mdir, root)
	if err != nil || got != filepath.Join(root, "ck/a.pt") {
		t.Fatalf("root fallback: got %q, %v", got, err)
	}
	writeFile(t, filepath.Join(mdir, "ck/a.pt"), "manifest")
	got, err = ResolveCheckpoint(ref, mdir, root)
	if err != nil || got != filepath.Join(mdir, "ck/a.pt") {
		t.Fatalf("manifest folder first: got %q, %v", got, err)
	}

	t.Setenv(CheckpointRootEnv, root)
	got, err = ResolveCheckpoint(ref, "", "")
	if err != nil || got != filepath.Join(root, "ck/a.pt") {
		t.Fatalf("env root: got %q, %v", got, err)
	}
}

func TestResolveCheckpointErrors(t *testing.T) {
	t.Setenv(CheckpointRootEnv, "")
	dir := t.TempDir()
	for _, tc := range []struct {
		uri, want string
	}{
		{"hf://org/model", `remote URI scheme "hf" is not fetched at run time; download the file and pass its path (client.WithCheckpointPath)`},
		{"missing.pt", "not found (tried " + filepath.Join(dir, "missing.pt")},
		{"/definitely/not/here.pt", "no such file"},
	} {
		_, err := ResolveCheckpoint(spec.InferenceCheckpointRef{Role: "model", URI: tc.uri}, dir, "")
		if err == nil || !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want error containing %q", tc.uri, err, tc.want)
		}
	}
}

func TestVerifyCheckpoint(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "m.pt")
	writeFile(t, p, "hello")
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if err := VerifyCheckpoint(p, spec.InferenceCheckpointRef{SHA256: sum, SizeBytes: 5}); err != nil {
		t.Fatal(err)
	}
	err := VerifyCheckpoint(p, spec.InferenceCheckpointRef{SizeBytes: 6})
	if err == nil || !strings.Contains(err.Error(), "size 5 bytes, manifest says 6") {
		t.Fatalf("size mismatch: %v", err)
	}
	writeFile(t, p, "hellO")
	err = VerifyCheckpoint(p, spec.InferenceCheckpointRef{SHA256: sum})
	if err == nil || !strings.Contains(err.Error(), "manifest says "+sum) {
		t.Fatalf("corrupted file accepted: %v", err)
	}
}
