package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

type mode string

func TestValueOf(t *testing.T) {
	n := int32(3)
	var none *float64
	var noTensor *tensor.Tensor
	x := tensor.FromFloat32([]float32{1, 2}, 2)
	for _, c := range []struct {
		in, want any
	}{
		{nil, nil},
		{mode("a"), "a"},
		{uint16(7), int64(7)},
		{float32(1.5), 1.5},
		{&n, int64(3)},
		{none, nil},
		{noTensor, nil},
		{x, x},
		{[]int{1, 2}, []any{int64(1), int64(2)}},
		{[2]bool{true, false}, []any{true, false}},
		{map[string][]mode{"b": {"c"}}, map[string]any{"b": []any{"c"}}},
		{map[mode]*tensor.Tensor{"t": x}, map[string]any{"t": x}},
	} {
		got, err := ValueOf(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ValueOf(%#v) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	deep := any(1)
	for range 40 {
		deep = []any{deep}
	}
	for _, c := range []struct {
		in   any
		want string
	}{
		{func() {}, "unsupported value of type func()"},
		{map[int]int{1: 1}, "map with int keys"},
		{[]any{1, struct{}{}}, "[1]: unsupported value of type struct {}"},
		{&tensor.Tensor{DType: tensor.Float32, Shape: []int64{3}, Data: make([]byte, 4)}, "needs 12 bytes"},
		{deep, "nested deeper than 32 levels"},
	} {
		if _, err := ValueOf(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValueOf(%T): %v, want an error containing %q", c.in, err, c.want)
		}
	}
}
