package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// richSnapshot holds every kind of engine value.
func richSnapshot() Snapshot {
	sp := rtSpec(10, 3, 1, "forward", "left")
	sp.Transport = "in-memory-rgb"
	return Snapshot{
		Origin: Origin{Family: "tiny-world", Variant: "default", Checkpoint: "sha256:0123", Task: "step",
			Params: map[string]any{"speed": 2.5, "name": "ü", "n": int64(-3)}},
		Next:      7,
		NextFrame: 9,
		FrameSize: [3]int64{32, 32, 3},
		Spec:      *sp,
		Controls:  Controls{"forward": 1, "left": -0.25},
		State: map[string]any{
			"f32":   tensor.FromFloat32([]float32{1.5, float32(math.Inf(-1)), -0}, 3),
			"bf16":  &tensor.Tensor{DType: tensor.BFloat16, Shape: []int64{2, 1}, Data: []byte{1, 2, 3, 4}},
			"bool":  &tensor.Tensor{DType: tensor.Bool, Shape: []int64{}, Data: []byte{1}},
			"empty": &tensor.Tensor{DType: tensor.Int64, Shape: []int64{0, 4}, Data: []byte{}},
			"list":  []any{nil, true, false, int64(math.MinInt64), math.NaN(), "x", []any{}, map[string]any{}},
		},
		Log: ControlsLog{Start: 0, End: 7, Changes: []ControlChange{{0, Controls{}}, {3, Controls{"forward": 1}}, {6, Controls{"forward": 1, "left": -0.25}}}},
	}
}

func TestSnapshotEncodingIsLossless(t *testing.T) {
	snap := richSnapshot()
	data, err := snap.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Snapshot
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	again, err := got.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatal("decode then encode changed the bytes")
	}
	// NaN != NaN: compare the NaN's bits, then the rest with reflect.
	list := got.State.(map[string]any)["list"].([]any)
	if math.Float64bits(list[4].(float64)) != math.Float64bits(math.NaN()) {
		t.Fatal("NaN bits changed")
	}
	list[4], snap.State.(map[string]any)["list"].([]any)[4] = 0.0, 0.0
	if !reflect.DeepEqual(got, snap) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, snap)
	}
}

func TestSnapshotEncodingRefuses(t *testing.T) {
	snap := richSnapshot()
	snap.State = map[string]any{"x": 3} // int, not int64
	if _, err := snap.MarshalBinary(); !errors.Is(err, ErrSnapshotValue) {
		t.Fatalf("an int in the state: %v, want ErrSnapshotValue", err)
	}
	snap.State = &tensor.Tensor{DType: tensor.Uint8, Shape: []int64{MaxSnapshotBytes + 1}, Data: make([]byte, MaxSnapshotBytes+1)}
	if _, err := snap.MarshalBinary(); !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("a state over the bound: %v, want ErrSnapshotTooLarge", err)
	}
	var s Snapshot
	if err := s.UnmarshalBinary(make([]byte, MaxSnapshotBytes+1)); !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("decoding too many bytes: %v, want ErrSnapshotTooLarge", err)
	}
	good, _ := richSnapshot().MarshalBinary()
	for i := range len(good) { // every truncation
		if err := s.UnmarshalBinary(good[:i]); !errors.Is(err, ErrSnapshotFormat) {
			t.Fatalf("truncated to %d bytes: %v, want ErrSnapshotFormat", i, err)
		}
	}
	if err := s.UnmarshalBinary(append(bytes.Clone(good), 0)); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("a trailing byte: %v, want ErrSnapshotFormat", err)
	}
	v2 := bytes.Clone(good)
	v2[len(snapshotMagic)] = 2
	if err := s.UnmarshalBinary(v2); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("version 2: %v, want ErrSnapshotFormat", err)
	}
	// A tensor whose shape claims more bytes than there are.
	huge := append([]byte(snapshotMagic), snapshotVersion)
	for range 4 {
		huge = appendString(huge, "")
	}
	huge = append(huge, tagTensor)
	huge = appendString(huge, "float32")
	huge = binary.AppendUvarint(huge, 2)
	huge = binary.AppendUvarint(huge, 1<<40)
	huge = binary.AppendUvarint(huge, 1<<40)
	if err := s.UnmarshalBinary(huge); !errors.Is(err, ErrSnapshotFormat) {
		t.Fatalf("a huge tensor shape: %v, want ErrSnapshotFormat", err)
	}
	if !reflect.DeepEqual(s, Snapshot{}) {
		t.Fatal("a failed decode changed the snapshot")
	}
}

func TestTokens(t *testing.T) {
	key := []byte("a key of thirty-two bytes, yes!!")
	snap := richSnapshot()
	tok, err := Seal(snap, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(tok, key); err != nil {
		t.Fatal(err)
	}
	for i := range tok { // every byte flipped
		bad := bytes.Clone(tok)
		bad[i] ^= 0x40
		_, err := Open(bad, key)
		if err == nil {
			t.Fatalf("byte %d flipped: opened", i)
		}
		if !errors.Is(err, ErrTokenTampered) && !errors.Is(err, ErrTokenForeignKey) && !errors.Is(err, ErrTokenFormat) && !errors.Is(err, ErrTokenTruncated) && !errors.Is(err, ErrSnapshotTooLarge) {
			t.Fatalf("byte %d flipped: %v, not a token error", i, err)
		}
		if i >= tokenHeader && !errors.Is(err, ErrTokenTampered) {
			t.Fatalf("payload or signature byte %d flipped: %v, want ErrTokenTampered", i, err)
		}
	}
	for _, n := range []int{0, 3, 5, tokenHeader - 1, tokenHeader, len(tok) / 2, len(tok) - 1} {
		if _, err := Open(tok[:n], key); !errors.Is(err, ErrTokenTruncated) {
			t.Fatalf("truncated to %d bytes: %v, want ErrTokenTruncated", n, err)
		}
	}
	if _, err := Open(append(bytes.Clone(tok), 0), key); !errors.Is(err, ErrTokenTampered) {
		t.Fatalf("a byte appended: %v, want ErrTokenTampered", err)
	}
	if _, err := Open(tok, []byte("another key of thirty-two bytes!")); !errors.Is(err, ErrTokenForeignKey) {
		t.Fatalf("another key: %v, want ErrTokenForeignKey", err)
	}
	if _, err := Open([]byte("GIF89a......"), key); !errors.Is(err, ErrTokenFormat) {
		t.Fatalf("not a token: %v, want ErrTokenFormat", err)
	}
	if _, err := Seal(snap, []byte("short")); !errors.Is(err, ErrKey) {
		t.Fatalf("a short key: %v, want ErrKey", err)
	}
	// A token re-signed with the right key but a foreign origin opens; the
	// restore refuses it.
	other := snap
	other.Origin.Family = "worldmodel"
	ftok, _ := Seal(other, key)
	opened, err := Open(ftok, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(opened, worldStep, WithOrigin(snap.Origin)); !errors.Is(err, ErrForeignModel) {
		t.Fatalf("restore a foreign model's snapshot: %v, want ErrForeignModel", err)
	}
}

// FuzzSnapshotUnmarshal feeds the decoder arbitrary bytes: it never
// panics, never allocates past the input's bounds, and what it accepts
// encodes back to bytes that decode to the same encoding.
func FuzzSnapshotUnmarshal(f *testing.F) {
	good, _ := richSnapshot().MarshalBinary()
	f.Add(good)
	small, _ := (&Snapshot{Spec: *rtSpec(8, 4, 2)}).MarshalBinary()
	f.Add(small)
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		if err := s.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		var s2 Snapshot
		if err := s2.UnmarshalBinary(again); err != nil {
			t.Fatalf("a re-encoded snapshot does not decode: %v", err)
		}
		third, _ := s2.MarshalBinary()
		if !bytes.Equal(again, third) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzOpen feeds Open arbitrary tokens: it never panics, and the only
// token it accepts under the fuzz key is the one sealed with it.
func FuzzOpen(f *testing.F) {
	key := []byte("the fuzz key, thirty-two bytes..")
	tok, err := Seal(richSnapshot(), key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:tokenHeader])
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Open(data, key); err == nil && !bytes.Equal(data, tok) {
			t.Fatal("Open accepted a token Seal did not make")
		}
	})
}
