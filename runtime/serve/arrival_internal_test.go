package serve

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestReadReservedSmallMessages: a message of a few dozen bytes — a
// session's controls, one a chunk on every WebSocket — is read without a
// buffer of the whole reservation (64 KiB each, which the collector then
// cleared and swept), and holds the reservation made before it, no more.
func TestReadReservedSmallMessages(t *testing.T) {
	msg := []byte(`{"event":"controls","controls":{"right":1},"ack":41}`)
	a := &admission{maxRequests: 1, maxBytes: 1 << 30}
	const reads = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range reads {
		hold := &holding{a: a}
		if err := hold.add(bodyCost * bodyStep); err != nil {
			t.Fatal(err)
		}
		got, err := readReserved(bytes.NewReader(msg), bodyStep, 1<<20, hold)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("read %q, want %q", got, msg)
		}
		if hold.n != bodyCost*bodyStep {
			t.Fatalf("a small message holds %d bytes of the budget, want the %d reserved before it", hold.n, bodyCost*bodyStep)
		}
		hold.done()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 4<<10 {
		t.Fatalf("reading a %d-byte message allocated %d bytes on average, want at most 4 KiB", len(msg), per)
	}
	if n := a.bytesInUse(); n != 0 {
		t.Fatalf("%d bytes of the budget still held", n)
	}
}

// TestReadReservedGrows: a body of unknown length larger than the first
// reservation is read whole, and what it holds of the budget covers its
// buffer, reserved before each growth; past the budget the read is
// refused (429), and past the limit the reader says so.
func TestReadReservedGrows(t *testing.T) {
	body := strings.Repeat("x", 200<<10)
	a := &admission{maxRequests: 1, maxBytes: 1 << 30}
	hold := &holding{a: a}
	if err := hold.add(bodyCost * bodyStep); err != nil {
		t.Fatal(err)
	}
	got, err := readReserved(strings.NewReader(body), bodyStep, 1<<20, hold)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != body {
		t.Fatalf("read %d bytes, want %d", len(got), len(body))
	}
	if hold.n != bodyCost*int64(cap(got)) || cap(got) < len(body) {
		t.Fatalf("holds %d bytes for a buffer of %d, want %d", hold.n, cap(got), bodyCost*cap(got))
	}
	hold.done()

	// A budget of 100 KiB of body: the growth past it is refused before it is made.
	small := &admission{maxRequests: 1, maxBytes: bodyCost * (100 << 10)}
	hold = &holding{a: small}
	if err := hold.add(bodyCost * bodyStep); err != nil {
		t.Fatal(err)
	}
	_, err = readReserved(strings.NewReader(body), bodyStep, 1<<20, hold)
	if se, ok := err.(*statusError); !ok || se.status != 429 {
		t.Fatalf("over the budget: got %v, want a 429", err)
	}
	if hold.n != bodyCost*bodyStep {
		t.Fatalf("after the refusal the body holds %d, want the %d reserved before it", hold.n, bodyCost*bodyStep)
	}
	hold.done()
}
