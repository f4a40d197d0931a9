package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// TestSessionKeyFileMovesSessions runs three wfserve processes: two read
// the same -session-key-file, one another key. A session snapshotted on
// the first at chunk 3 restores on the second, whose chunks 3 to 5 equal
// an uninterrupted in-process session's bit for bit; the third refuses the
// token (400, another key). A key file shorter than 16 bytes stops wfserve
// with exit 2.
func TestSessionKeyFileMovesSessions(t *testing.T) {
	dir := t.TempDir()
	shared, other, short := filepath.Join(dir, "shared.key"), filepath.Join(dir, "other.key"), filepath.Join(dir, "short.key")
	os.WriteFile(shared, []byte("  bm90IGEgcmVhbCBrZXksIGJ1dCAzMiBieXRlcyE=\n"), 0o600)
	os.WriteFile(other, []byte("another replica set's key, 32 B."), 0o600)
	os.WriteFile(short, []byte("short key\n"), 0o600)
	var stderr bytes.Buffer
	if code := run([]string{"-session-key-file", short, "x.yaml"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "want at least 16") {
		t.Errorf("a short key: exit %d\n%s", code, stderr.String())
	}

	a := startProc(t, "-session-key-file", shared)
	b := startProc(t, "-session-key-file", shared)
	c := startProc(t, "-session-key-file", other)
	ctx := context.Background()
	params := tinyworld.StepParams{Speed: 3}
	unpaced := stream.WithPacing(false)
	script := func(i int) stream.Controls {
		switch i {
		case 0:
			return stream.Controls{"right": 1}
		case 2, 4:
			return stream.Controls{"forward": 1, "left": float64(i) / 4}
		}
		return nil
	}
	play := func(s *stream.Session, from, n int) [][]byte {
		var out [][]byte
		for i := from; i < from+n; i++ {
			if c := script(i); c != nil {
				if err := s.SetControls(c); err != nil {
					t.Fatal(err)
				}
			}
			for ch, err := range s.Chunks(ctx) {
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				if ch.Index != i {
					t.Fatalf("chunk %d, want %d", ch.Index, i)
				}
				out = append(out, bytes.Clone(ch.Video.Frames.Data))
				break
			}
		}
		return out
	}
	in, err := tinyworld.New(client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ref, err := in.StepStream(ctx, params, unpaced)
	if err != nil {
		t.Fatal(err)
	}
	want := play(ref, 0, 6)

	open := func(url string) (*tinyworld.Client, *remote.Client) {
		rc, err := remote.New(tinyworld.Spec(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		return tinyworld.NewClient(rc), rc
	}
	wa, _ := open(a.url)
	live, err := wa.StepStream(ctx, params, unpaced)
	if err != nil {
		t.Fatal(err)
	}
	play(live, 0, 3)
	snap, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, rb := open(b.url)
	moved, err := rb.RestoreStream(ctx, snap, unpaced)
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range play(moved, 3, 3) {
		if !bytes.Equal(got, want[3+i]) {
			t.Fatalf("chunk %d on the other replica differs from the in-process session's", 3+i)
		}
	}
	_, rc := open(c.url)
	refused, err := rc.RestoreStream(ctx, snap, unpaced)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range refused.Chunks(ctx) {
		var se *remote.StatusError
		if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(err.Error(), "another key") {
			t.Errorf("a replica with another key: %v", err)
		}
		break
	}
}
