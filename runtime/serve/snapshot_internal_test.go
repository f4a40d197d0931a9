package serve

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

var testKey = []byte("the fuzz session key, 32 bytes..")

// TestOpenTokenBounds: a token parameter longer than the largest token's
// base64 is refused (413) before it is decoded.
func TestOpenTokenBounds(t *testing.T) {
	_, err := openToken(strings.Repeat("A", maxTokenText+4), testKey)
	if status(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "more than a snapshot") {
		t.Fatalf("a huge token: %d %v", status(err), err)
	}
	if _, err := openToken("", testKey); status(err) != http.StatusBadRequest || !errors.Is(err, stream.ErrTokenTruncated) {
		t.Fatalf("an empty token: %d %v", status(err), err)
	}
	if err := checkSessionKey([]byte("short")); err == nil {
		t.Fatal("a 5-byte session key was taken")
	}
}

// FuzzRestoreParameters feeds the snapshot and replay parameters' decoders
// arbitrary text: they never panic, refuse with a 4xx, and what they take
// checks.
func FuzzRestoreParameters(f *testing.F) {
	sp := spec.DefaultRealtimeSpec()
	sp.Controls = []string{"left"}
	snap := stream.Snapshot{Spec: sp, Next: 1, Log: stream.ControlsLog{Start: 0, End: 1, Changes: []stream.ControlChange{{From: 0, Controls: stream.Controls{"left": 1}}}}}
	tok, err := stream.Seal(snap, testKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(base64.StdEncoding.EncodeToString(tok), `{"start":0,"end":1,"changes":[{"from":0,"controls":{"left":1}}]}`)
	f.Add("V0ZTVAE=", `{"start":0,"end":0,"changes":[]}`)
	f.Add("", `{"start":-1}`)
	f.Fuzz(func(t *testing.T, token, replay string) {
		if s, err := openToken(token, testKey); err != nil {
			if c := status(err); c < 400 || c >= 500 {
				t.Fatalf("a token refused with %d: %v", c, err)
			}
		} else if err := s.Check(); err != nil {
			t.Fatalf("an opened token does not check: %v", err)
		}
		if l, err := parseReplay(replay); err != nil {
			if c := status(err); c != http.StatusBadRequest {
				t.Fatalf("a log refused with %d: %v", c, err)
			}
		} else if err := l.Check(); err != nil || len(l.Changes) > stream.MaxLogChanges {
			t.Fatalf("a parsed log does not check: %v", err)
		}
	})
}
