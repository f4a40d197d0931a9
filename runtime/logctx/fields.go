// Package logctx is wfgen's logging pipeline on log/slog: a once-only
// configuration step (text or JSON, level and format from the environment),
// correlation fields carried by a context.Context and added to every record,
// their hand-over to child processes through the environment, and lifecycle
// events appended as JSON lines to a run-owned file.
//
// It is the Go form of the seed's logging helpers: bind_log_context /
// log_context become With / Scope, the contextvars token is the parent
// context (returning to it is the reset), and the correlation snapshot for a
// framework-owned child is EncodeEnv / AppendEnv, restored in the child by
// Configure (or RestoreFromEnv).
package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Fields are correlation fields: a run id, a request id, a rank, a model
// name... Values are kept in their JSON form (string, int64, float64, bool,
// nil, []any, map[string]any) so a field logged in the parent and the same
// field restored in a child are identical. With normalises other values:
// durations and times become strings, anything else goes through
// encoding/json, and a value JSON cannot encode becomes its fmt %v text.
type Fields map[string]any

type ctxKey struct{}

// bound is what a context or the process carries: the fields and the same
// fields as slog attributes sorted by key, computed once when bound.
type bound struct {
	fields Fields
	attrs  []slog.Attr
}

func newBound(f Fields) *bound { return &bound{fields: f, attrs: f.attrs()} }

// processFields are the fields every record of this process carries, set by
// RestoreFromEnv (the fields a parent handed over) or SetProcessFields.
var processFields atomic.Pointer[bound]

// With returns a child of ctx that carries fields on top of the fields ctx
// already carries; a key given again replaces the outer value. Empty keys are
// ignored. The parent ctx is unchanged: keep using it to "reset" the fields,
// the way the seed resets a contextvars token.
func With(ctx context.Context, fields Fields) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	merged := Fields{}
	if outer, ok := ctx.Value(ctxKey{}).(*bound); ok {
		maps.Copy(merged, outer.fields)
	}
	for k, v := range fields {
		if k == "" {
			continue
		}
		merged[k] = normalise(v)
	}
	return context.WithValue(ctx, ctxKey{}, newBound(merged))
}

// Scope runs fn with ctx extended by fields and returns fn's error: the
// scoped form of With (the seed's log_context context manager). The fields
// are visible only inside fn and to what fn passes its context to.
func Scope(ctx context.Context, fields Fields, fn func(ctx context.Context) error) error {
	return fn(With(ctx, fields))
}

// FromContext returns the correlation fields that apply to ctx: the process
// fields overlaid with the fields bound to ctx. The map is a fresh copy.
func FromContext(ctx context.Context) Fields {
	out := ProcessFields()
	if ctx != nil {
		if b, ok := ctx.Value(ctxKey{}).(*bound); ok {
			maps.Copy(out, b.fields)
		}
	}
	return out
}

// contextAttrs returns the attributes FromContext's fields map to, sorted
// by key, without copying in the common cases.
func contextAttrs(ctx context.Context) []slog.Attr {
	var proc, own []slog.Attr
	if p := processFields.Load(); p != nil {
		proc = p.attrs
	}
	if ctx != nil {
		if b, ok := ctx.Value(ctxKey{}).(*bound); ok {
			own = b.attrs
		}
	}
	switch {
	case len(proc) == 0:
		return own
	case len(own) == 0:
		return proc
	}
	out := make([]slog.Attr, 0, len(proc)+len(own))
	i, j := 0, 0
	for i < len(proc) || j < len(own) {
		switch {
		case j == len(own) || (i < len(proc) && proc[i].Key < own[j].Key):
			out = append(out, proc[i])
			i++
		case i == len(proc) || own[j].Key < proc[i].Key:
			out = append(out, own[j])
			j++
		default: // same key: the context's value wins
			out = append(out, own[j])
			i++
			j++
		}
	}
	return out
}

// ProcessFields returns a copy of the fields every record of this process
// carries (usually those restored from the parent's environment).
func ProcessFields() Fields {
	out := Fields{}
	if p := processFields.Load(); p != nil {
		maps.Copy(out, p.fields)
	}
	return out
}

// SetProcessFields replaces the process-wide fields (normalised like With).
// A nil or empty map clears them.
func SetProcessFields(fields Fields) {
	f := Fields{}
	for k, v := range fields {
		if k != "" {
			f[k] = normalise(v)
		}
	}
	processFields.Store(newBound(f))
}

// attrs returns the fields as slog attributes sorted by key.
func (f Fields) attrs() []slog.Attr {
	keys := slices.Sorted(maps.Keys(f))
	out := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		out = append(out, slog.Attr{Key: k, Value: jsonValue(f[k])})
	}
	return out
}

// jsonValue maps a normalised field value to a slog value.
func jsonValue(v any) slog.Value {
	switch x := v.(type) {
	case string:
		return slog.StringValue(x)
	case int64:
		return slog.Int64Value(x)
	case float64:
		return slog.Float64Value(x)
	case bool:
		return slog.BoolValue(x)
	default:
		return slog.AnyValue(x)
	}
}

// normalise converts a field value to its JSON form (see Fields).
func normalise(v any) any {
	if lv, ok := v.(slog.LogValuer); ok {
		v = lv.LogValue().Resolve().Any()
	}
	if sv, ok := v.(slog.Value); ok {
		v = sv.Resolve().Any()
	}
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return x
	case bool:
		return x
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return uintValue(x)
	case float32:
		return floatValue(float64(x))
	case float64:
		return floatValue(x)
	case time.Duration:
		return x.String()
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	out, err := decodeJSONValue(b)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return out
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}

// floatValue keeps finite floats; NaN and infinities, which JSON cannot
// carry, become their text.
func floatValue(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		// Integral floats decode as int64 in the child; keep both sides equal.
		return int64(f)
	}
	return f
}

// decodeJSONValue decodes one JSON value into the normalised form: numbers
// become int64 when integral and in range, float64 otherwise.
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return fromNumbers(v)
}

func fromNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return floatValue(f), nil
	case []any:
		for i := range x {
			e, err := fromNumbers(x[i])
			if err != nil {
				return nil, err
			}
			x[i] = e
		}
		return x, nil
	case map[string]any:
		for k := range x {
			e, err := fromNumbers(x[k])
			if err != nil {
				return nil, err
			}
			x[k] = e
		}
		return x, nil
	}
	return v, nil
}
