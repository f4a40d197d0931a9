package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Decode decodes Value into SchemaVersion and Spec, applying the spec
// types' defaults (kind "string", target "call_kwargs", status "unknown",
// default ids "default", ...). It is meant for a Value that passed schema
// validation: a value of the wrong type is skipped (left at its default),
// the rest is decoded, and the first such problem is returned.
//
// Decoding follows encoding/json's rules for the types' json tags (unknown
// keys are ignored, null sets slices, maps, pointers and interfaces to nil)
// and takes each struct's defaults from its UnmarshalJSON method, applied
// to "{}". Free-form values (field defaults and the kwargs maps) keep the
// integer / float distinction of the file: integer literals become int64,
// other numbers float64, lists []any and mappings map[string]any.
func (f *File) Decode() error {
	m, ok := f.Value.(map[string]any)
	if !ok {
		return fmt.Errorf("manifest is not a mapping")
	}
	var d decoder
	var doc Document
	d.value(m, reflect.ValueOf(&doc).Elem())
	f.SchemaVersion = doc.SchemaVersion
	f.Spec = &doc.ModelInferenceSpec
	return d.err
}

// decoder decodes document values into Go values by reflection.
type decoder struct {
	err error // the first problem
}

func (d *decoder) fail(v any, t reflect.Type) {
	if d.err == nil {
		d.err = fmt.Errorf("cannot decode %s into %s", describe(v), t)
	}
}

func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[spec.Number]()
	dimType         = reflect.TypeFor[spec.Dim]()
)

// value decodes v into rv (settable).
func (d *decoder) value(v any, rv reflect.Value) {
	if v == nil {
		switch rv.Kind() {
		case reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
			rv.SetZero()
		}
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		d.value(v, rv.Elem())
	case reflect.Interface:
		if rv.NumMethod() != 0 {
			d.fail(v, rv.Type())
			return
		}
		rv.Set(reflect.ValueOf(Native(v)))
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		d.object(m, rv)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || rv.Type().Key().Kind() != reflect.String {
			d.fail(v, rv.Type())
			return
		}
		out := reflect.MakeMapWithSize(rv.Type(), len(m))
		for k, e := range m {
			ev := reflect.New(rv.Type().Elem()).Elem()
			d.value(e, ev)
			out.SetMapIndex(reflect.ValueOf(k).Convert(rv.Type().Key()), ev)
		}
		rv.Set(out)
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		out := reflect.MakeSlice(rv.Type(), len(l), len(l))
		for i, e := range l {
			d.value(e, out.Index(i))
		}
		rv.Set(out)
	case reflect.String:
		if n, ok := v.(json.Number); ok && (rv.Type() == numberType || rv.Type() == dimType) {
			rv.SetString(string(n)) // kept as written (spec.Number, spec.Dim)
			return
		}
		s, ok := v.(string)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			// JSON Schema counts an integral float literal such as 8.0 as
			// an integer, so accept it here too.
			x, ferr := strconv.ParseFloat(string(n), 64)
			if ferr != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				d.fail(v, rv.Type())
				return
			}
			i = int64(x)
		}
		if rv.OverflowInt(i) {
			d.fail(v, rv.Type())
			return
		}
		rv.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || rv.OverflowUint(u) {
			d.fail(v, rv.Type())
			return
		}
		rv.SetUint(u)
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			d.fail(v, rv.Type())
			return
		}
		x, err := strconv.ParseFloat(string(n), 64)
		if err != nil || rv.OverflowFloat(x) {
			d.fail(v, rv.Type())
			return
		}
		rv.SetFloat(x)
	default:
		d.fail(v, rv.Type())
	}
}

// object decodes a mapping into a struct, starting from the struct's
// defaults.
func (d *decoder) object(m map[string]any, rv reflect.Value) {
	info := structInfoFor(rv.Type())
	if info.unmarshaler {
		// The type's defaults: its UnmarshalJSON applied to an empty object.
		if err := rv.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte("{}")); err != nil && d.err == nil {
			d.err = fmt.Errorf("defaults of %s: %w", rv.Type(), err)
		}
	}
	for k, v := range m {
		idx, ok := info.fields[k]
		if !ok {
			continue // unknown keys are reported by the schema check
		}
		d.value(v, rv.FieldByIndex(idx))
	}
}

// structInfo is what decoding needs from a struct type.
type structInfo struct {
	fields      map[string][]int // JSON key -> field index path
	unmarshaler bool             // *T implements json.Unmarshaler
}

var structInfos sync.Map // reflect.Type -> *structInfo

func structInfoFor(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{fields: map[string][]int{}, unmarshaler: reflect.PointerTo(t).Implements(unmarshalerType)}
	collectFields(t, nil, si.fields)
	structInfos.Store(t, si)
	return si
}

// collectFields maps the JSON keys of t's fields, following encoding/json:
// an embedded struct without a JSON name is inlined, "-" is skipped and a
// shallower field wins over an embedded one.
func collectFields(t reflect.Type, index []int, out map[string][]int) {
	var embedded []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, f)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := out[name]; !taken {
			out[name] = append(append([]int(nil), index...), i)
		}
	}
	for _, f := range embedded {
		collectFields(f.Type, append(append([]int(nil), index...), f.Index...), out)
	}
}

// Native converts a document value into plain Go values: an integer
// json.Number becomes int64, any other number float64 (a number that does
// not fit stays json.Number), and lists and mappings are converted
// recursively. Other values are returned as they are.
func Native(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Native(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Native(e)
		}
		return out
	}
	return v
}

// decodeJSON decodes Value with encoding/json, the reference Decode must
// agree with (tested).
func (f *File) decodeJSON() (*spec.ModelInferenceSpec, error) {
	m, ok := f.Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("manifest is not a mapping")
	}
	body := make(map[string]any, len(m))
	for k, v := range m {
		if k != "$schema" && k != "schema_version" {
			body[k] = v
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	spec := new(spec.ModelInferenceSpec)
	return spec, json.Unmarshal(b, spec)
}
