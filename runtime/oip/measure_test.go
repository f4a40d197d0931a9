package oip_test

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
)

// repeat is a JSON array of n copies of item.
func repeat(item string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// A body of many small values — {"inputs":[{},{},…]}, a parameter object
// of many keys, a shape of many dimensions — takes many times its size
// once decoded. Too many inputs or outputs are refused before anything is
// decoded; whatever else is told to Limits.Reserve before decoding, and
// decoding then allocates no more than that and the body twice over.
func TestDecodeRequestCountsBeforeDecoding(t *testing.T) {
	many := `{"inputs":` + repeat("{}", 100_000) + `}`
	manyBody := []byte(many)
	var err error
	n := enginetest.Allocated(func() { _, err = oip.DecodeRequest(manyBody, oip.Limits{MaxInputs: 1024}) })
	if err == nil || !strings.Contains(err.Error(), "100000 inputs") {
		t.Fatalf("100,000 inputs: %v", err)
	}
	if n > uint64(len(many)) {
		t.Errorf("refusing 100,000 inputs allocated %d bytes, more than the %d-byte body", n, len(many))
	}
	outputs := `{"inputs":[],"outputs":` + repeat(`{"name":"x"}`, 2000) + `}`
	if _, err := oip.DecodeRequest([]byte(outputs), oip.Limits{MaxInputs: 1024}); err == nil || !strings.Contains(err.Error(), "2000 outputs") {
		t.Errorf("2,000 outputs: %v", err)
	}

	keys := make([]string, 50_000)
	for i := range keys {
		keys[i] = `"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `":` + `1`
	}
	for name, body := range map[string]string{
		"empty inputs": many,
		"parameters":   `{"parameters":{` + strings.Join(keys, ",") + `},"inputs":[]}`,
		"long shape":   `{"inputs":[{"name":"x","datatype":"INT64","shape":` + repeat("1", 200_000) + `,"data":[1]}]}`,
		"outputs":      `{"inputs":[],"outputs":` + repeat(`{"name":"x","parameters":{"binary_data":true}}`, 20_000) + `}`,
		"nested":       `{"inputs":[],"parameters":{"a":` + repeat(repeat("[]", 100), 1000) + `}}`,
		"tensor data":  `{"inputs":[{"name":"x","datatype":"FP32","shape":[100000],"data":` + repeat("1.5", 100_000) + `}]}`,
	} {
		var reserved int64
		lim := oip.Limits{Reserve: func(n int64) error { reserved += n; return nil }}
		b := []byte(body)
		n := enginetest.Allocated(func() { oip.DecodeRequest(b, lim) })
		if bound := uint64(reserved) + 2*uint64(len(body)); n > bound {
			t.Errorf("%s (%d-byte body): decoding allocated %d bytes, more than the %d reserved and the body twice over", name, len(body), n, reserved)
		}
		t.Logf("%s: body %d, reserved %d, allocated %d", name, len(body), reserved, n)
	}
}
