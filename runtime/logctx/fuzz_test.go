package logctx_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// FuzzDecodeEnv checks DecodeEnv never panics and that what it accepts
// survives a trip through a child's environment unchanged.
func FuzzDecodeEnv(f *testing.F) {
	for _, s := range []string{"", `{"run_id":"r1","rank":2}`, `{"a":{"b":[1,2.5,"x",null,true]}}`, `[1]`, `{"a":1e400}`, `{"a":-0}`, "{\"\xff\":1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := logctx.DecodeEnv(s)
		if err != nil {
			if !strings.Contains(err.Error(), logctx.EnvContext) {
				t.Fatalf("error does not name the variable: %v", err)
			}
			return
		}
		logctx.SetProcessFields(fields)
		defer logctx.SetProcessFields(nil)
		again, err := logctx.DecodeEnv(logctx.EncodeEnv(nil))
		if err != nil {
			t.Fatalf("re-decoding own encoding: %v", err)
		}
		if !cmp.Equal(logctx.ProcessFields(), again) {
			t.Fatalf("round trip changed fields:\n%s", cmp.Diff(logctx.ProcessFields(), again))
		}
	})
}

// FuzzDecodeEvents checks the JSONL reader never panics and that each
// accepted event re-encodes to a line it accepts again.
func FuzzDecodeEvents(f *testing.F) {
	f.Add([]byte(`{"schema":"wfgen.lifecycle/v1","time":"2024-01-01T00:00:00.000000Z","event":"started","pid":7,"data":{"argv":["a"]}}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"schema":"s","time":"t","event":"e","pid":1,"context":{"k":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := logctx.DecodeEvents(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		for _, e := range evs {
			if e.Event == "" {
				t.Fatalf("accepted an event without a name: %+v", e)
			}
		}
	})
}
