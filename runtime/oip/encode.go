package oip

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r encoded exactly as json.Marshal encodes it, for
// outputs whose Data are compact JSON (as every encoder of this package
// makes them): json.Marshal's reflection and its re-validation of each
// output's data cost a server more than the rest of encoding an embedding,
// and for a video chunk most of its time. Data are appended as they are;
// Data that are not valid JSON make the result invalid, where json.Marshal
// would fail.
func (r *InferenceResponse) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"model_name":`...)
	b = appendString(b, r.ModelName)
	if r.ModelVersion != "" {
		b = append(b, `,"model_version":`...)
		b = appendString(b, r.ModelVersion)
	}
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, r.ID)
	}
	var err error
	if len(r.Parameters) > 0 {
		b = append(b, `,"parameters":`...)
		if b, err = appendParameters(b, r.Parameters); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"outputs":`...)
	if r.Outputs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Outputs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = r.Outputs[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendJSON appends t as json.Marshal encodes it (Data taken as compact).
func (t *Tensor) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = appendString(b, t.Name)
	b = append(b, `,"shape":`...)
	if t.Shape == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, d := range t.Shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, ']')
	}
	b = append(b, `,"datatype":`...)
	b = appendString(b, string(t.Datatype))
	if len(t.Parameters) > 0 {
		b = append(b, `,"parameters":`...)
		var err error
		if b, err = appendParameters(b, t.Parameters); err != nil {
			return nil, err
		}
	}
	if len(t.Data) > 0 { // omitempty: absent when the tensor travels binary
		b = append(b, `,"data":`...)
		b = append(b, t.Data...)
	}
	return append(b, '}'), nil
}

// appendParameters appends p with its keys sorted, as json.Marshal does;
// values other than strings go through json.Marshal.
func appendParameters(b []byte, p Parameters) ([]byte, error) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		switch v := p[k].(type) {
		case string:
			b = appendString(b, v)
		default:
			j, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			b = append(b, j...)
		}
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, as json.Marshal writes it
// (which escapes <, > and & too): printable ASCII directly, anything else
// through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a Go string always marshals
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
