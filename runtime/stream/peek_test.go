package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestPeekReadsWithoutTheKey: Peek gives what Open gives, plus the token,
// and refuses malformed tokens with Open's errors; a tampered token still
// peeks (only the key can tell), which is why a server opens what it gets.
func TestPeekReadsWithoutTheKey(t *testing.T) {
	key := []byte("the server's key, 32 bytes long.")
	snap := richSnapshot()
	tok, err := Seal(snap, key)
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := Peek(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(peeked.Token, tok) || &peeked.Token[0] == &tok[0] {
		t.Fatal("Peek's snapshot does not hold a copy of the token")
	}
	opened, err := Open(tok, key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := opened.MarshalBinary()
	b, _ := peeked.MarshalBinary()
	if !bytes.Equal(a, b) || opened.Token != nil {
		t.Fatal("Peek and Open read different snapshots (or Open set a token)")
	}
	for _, c := range []struct {
		name string
		tok  []byte
		want error
	}{
		{"empty", nil, ErrTokenTruncated},
		{"not a token", []byte("hello, world"), ErrTokenFormat},
		{"truncated", tok[:len(tok)-1], ErrTokenTruncated},
		{"trailing", append(bytes.Clone(tok), 0), ErrTokenTampered},
		{"header only", tok[:tokenHeader], ErrTokenTruncated},
	} {
		if _, err := Peek(c.tok); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	bad := bytes.Clone(tok)
	bad[tokenHeader+len(snapshotMagic)] = 99 // the payload's format version
	if _, err := Peek(bad); !errors.Is(err, ErrSnapshotFormat) {
		t.Errorf("a bad payload: %v", err)
	}
}

// TestSnapshotHookAndPending: a session with a snapshot hook returns the
// hook's snapshot; Pending reads FromSnapshot and WithReplay among options
// without running any (a controls hook among them is not called).
func TestSnapshotHookAndPending(t *testing.T) {
	want := richSnapshot()
	s, err := New(rtSpec(10, 3, 1, "forward"), func(context.Context, StepRequest) (StepResult, error) {
		return StepResult{}, errors.New("no step")
	}, WithSnapshotHook(func() (Snapshot, error) { return want, nil }))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Snapshot()
	if err != nil || got.Next != want.Next || got.Origin.Task != want.Origin.Task {
		t.Fatalf("Snapshot with a hook: %+v, %v", got, err)
	}
	called := false
	hook := WithControlsHook(func(Controls) error { called = true; return nil })
	if snap, log := Pending(hook, WithControls(Controls{"forward": 1}), WithPacing(false)); snap != nil || log != nil {
		t.Fatal("Pending found a snapshot or log among options that have none")
	}
	snap, log := Pending(hook, WithControls(Controls{"forward": 1}), FromSnapshot(want), WithReplay(want.Log))
	if called {
		t.Fatal("Pending called a controls hook")
	}
	if snap == nil || snap.Next != want.Next || log == nil || !reflect.DeepEqual(*log, want.Log) {
		t.Fatalf("Pending: %v, %v", snap, log)
	}
}

// TestControlsLogJSON: the log's JSON form round-trips and is the one the
// docs give.
func TestControlsLogJSON(t *testing.T) {
	l := ControlsLog{Start: 0, End: 4, Changes: []ControlChange{{0, Controls{"left": 1}}, {2, Controls{}}}}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"start":0,"end":4,"changes":[{"from":0,"controls":{"left":1}},{"from":2,"controls":{}}]}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	var back ControlsLog
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// FuzzPeek feeds Peek arbitrary tokens: it never panics, and what it
// accepts holds the token and seals again into a token that peeks.
func FuzzPeek(f *testing.F) {
	tok, err := Seal(richSnapshot(), []byte("the fuzz key, thirty-two bytes.."))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:tokenHeader])
	f.Add([]byte(tokenMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := Peek(data)
		if err != nil {
			return
		}
		if !bytes.Equal(snap.Token, data) {
			t.Fatal("a peeked snapshot does not hold its token")
		}
		again, err := Seal(snap, []byte("another fuzz key, 32 bytes long."))
		if err != nil {
			t.Fatalf("a peeked snapshot does not seal: %v", err)
		}
		if _, err := Peek(again); err != nil {
			t.Fatalf("a peeked snapshot sealed again does not peek: %v", err)
		}
	})
}
