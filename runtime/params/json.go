package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// DecodeJSON decodes params keyed by field id into dst (a pointer to a
// params struct already holding the defaults, of a type without an
// UnmarshalJSON method of its own). Unknown keys are an error, and so is a
// missing required field; type errors name the field by its id, never a
// Go type.
func (r Rules) DecodeJSON(b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errors.New("unexpected data after the params object")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return jsonError(err)
	}
	var missing []string
	for _, f := range r {
		if f.Presence == spec.Required {
			if _, ok := keys[f.Spec.FieldID]; !ok {
				missing = append(missing, f.Spec.FieldID)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required field(s) %s", strings.Join(missing, ", "))
	}
	return nil
}

// jsonError rewrites encoding/json's type errors, which name Go types, in
// terms of the params' JSON: the field id and the JSON value.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("cannot unmarshal %s into params (want a JSON object keyed by field id)", te.Value)
		}
		return fmt.Errorf("%s: cannot unmarshal %s into %s", te.Field, te.Value, jsonType(te.Type))
	}
	return err
}

// jsonType names a Go type by the JSON it takes.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an object"
}
