package tensor

import (
	"errors"
	"testing"
)

func TestOutputBufferAcquireRelease(t *testing.T) {
	var b OutputBuffer
	first, err := b.Acquire(100)
	if err != nil || len(first) < 100 {
		t.Fatalf("Acquire(100) = %d bytes, %v", len(first), err)
	}
	if _, err := b.Acquire(10); !errors.Is(err, ErrOutputBufferBusy) {
		t.Fatalf("second Acquire while in use: %v, want ErrOutputBufferBusy", err)
	}
	b.Release()
	again, err := b.Acquire(50)
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &first[0] {
		t.Error("a smaller request got new memory; want the same memory back")
	}
	b.Release()
	grown, err := b.Acquire(200)
	if err != nil || len(grown) < 200 {
		t.Fatalf("Acquire(200) = %d bytes, %v", len(grown), err)
	}
	b.Release()
	if kept, _ := b.Acquire(1); &kept[0] != &grown[0] {
		t.Error("the grown memory was not kept for later calls")
	}
}

func TestTensorClone(t *testing.T) {
	a := FromFloat32([]float32{1, 2, 3}, 3)
	c := a.Clone()
	a.Data[0], a.Shape[0] = 9, 1
	if got, _ := c.Float32s(); len(got) != 3 || got[0] != 1 || c.Shape[0] != 3 {
		t.Errorf("clone changed with the original: %v %v", got, c.Shape)
	}
	if (*Tensor)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
}
