package oip

// What decoding a request's JSON will take, found before it is decoded:
// encoding/json turns every value outside tensor data into a Go value of
// its own (a Tensor, a map entry, an interface holding a number), so that
// a body of small values — {"inputs":[{},{},…]} — takes many times its own
// size once decoded. measureJSON walks the body's structure without
// allocating, so that a server can refuse such a request, or count what
// decoding it takes against its budget (Limits.Reserve), before a byte of
// it is decoded.

// What encoding/json allocates for one JSON value of a request outside
// tensor data, all it allocates on the way counted (the slices and maps
// that hold the values double as they grow), by where the value is:
// measured, 581 bytes for each of 100,000 empty inputs (a Tensor, 112
// bytes), 1,400 for each of 20,000 outputs with a parameter (a parameters
// object takes a decoder of its own), 60 for each of 50,000 parameters and
// 66 for each of 200,000 dimensions of a shape; under Go 1.27's
// encoding/json, 103 for each of 101,000 values of nested arrays.
const (
	inputCost      = 640  // an element of "inputs"
	outputCost     = 320  // an element of "outputs"
	parametersCost = 1024 // a "parameters" object (decoded by a json.Decoder of its own)
	valueCost      = 128  // any other value
)

// requestCost is what decoding any request allocates besides its values
// and tensor data (the request itself, the decoder's state).
const requestCost = 1 << 10

// maxDepth bounds the nesting of a request's JSON (encoding/json's own
// limit is 10,000; no request of the protocol nests deeper than a few
// levels, tensor data aside).
const maxDepth = 64

// jsonMeasure is what measureJSON found.
type jsonMeasure struct {
	inputs, outputs int   // elements of the top-level "inputs" and "outputs"
	cost            int64 // bytes decoding takes beyond the body and tensor data
}

// measureJSON walks body, a request's JSON, and returns the elements of
// its "inputs" and "outputs" arrays and what decoding it takes beyond the
// body itself and tensor data (the inputs' "data", which the decoder keeps
// as raw text: callers count it with the body). It stops at the first
// malformed byte and returns what it counted so far: encoding/json checks
// the whole body before it decodes anything, and says what is wrong.
func measureJSON(body []byte) jsonMeasure {
	w := jsonWalker{b: body, m: jsonMeasure{cost: requestCost}}
	w.ws()
	w.value(0, nil)
	return w.m
}

type jsonWalker struct {
	b   []byte
	i   int
	m   jsonMeasure
	bad bool // a malformed byte was met: stop
}

func (w *jsonWalker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value walks one value at depth; key is the member name it is the value
// of in an object at depth 1 (the request) or 3 (an input), "" otherwise.
func (w *jsonWalker) value(depth int, key []byte) {
	if w.bad || w.i >= len(w.b) || depth > maxDepth {
		w.bad = true
		return
	}
	if depth == 3 && string(key) == "data" {
		w.skip()
		return
	}
	switch {
	case depth == 2 && string(key) == "inputs":
		w.m.cost += inputCost
	case depth == 2 && string(key) == "outputs":
		w.m.cost += outputCost
	case (depth == 1 || depth == 3) && string(key) == "parameters":
		w.m.cost += parametersCost
	default:
		w.m.cost += valueCost
	}
	switch w.b[w.i] {
	case '{':
		w.i++
		w.ws()
		if w.i < len(w.b) && w.b[w.i] == '}' {
			w.i++
			return
		}
		for !w.bad {
			w.ws()
			name, ok := w.str()
			if !ok {
				w.bad = true
				return
			}
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] != ':' {
				w.bad = true
				return
			}
			w.i++
			w.ws()
			var member []byte
			if depth == 0 || depth == 2 {
				member = name
			}
			w.value(depth+1, member)
			w.ws()
			if !w.next('}') {
				return
			}
		}
	case '[':
		w.i++
		w.ws()
		if w.i < len(w.b) && w.b[w.i] == ']' {
			w.i++
			return
		}
		for !w.bad {
			w.ws()
			if depth == 1 {
				switch string(key) {
				case "inputs":
					w.m.inputs++
				case "outputs":
					w.m.outputs++
				}
			}
			var of []byte // an element of the request's "inputs" or "outputs"
			if depth == 1 {
				of = key
			}
			w.value(depth+1, of)
			w.ws()
			if !w.next(']') {
				return
			}
		}
	case '"':
		start := w.i
		if _, ok := w.str(); !ok {
			w.bad = true
			return
		}
		w.m.cost += int64(w.i - start) // a decoded string is at most its text
	default:
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return
			}
			w.i++
		}
	}
}

// next consumes the comma between two members or elements (true: another
// follows) or the closing byte (false); anything else is malformed.
func (w *jsonWalker) next(closing byte) bool {
	if w.i >= len(w.b) {
		w.bad = true
		return false
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return true
	case closing:
		w.i++
		return false
	}
	w.bad = true
	return false
}

// str consumes a string and returns its text without the quotes, escapes
// left as they are (member names are compared with plain ASCII names).
func (w *jsonWalker) str() ([]byte, bool) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return nil, false
	}
	start := w.i + 1
	for w.i++; w.i < len(w.b); w.i++ {
		switch w.b[w.i] {
		case '\\':
			w.i++
		case '"':
			w.i++
			return w.b[start : w.i-1], true
		}
	}
	return nil, false
}

// skip consumes one value without counting it: tensor data.
func (w *jsonWalker) skip() {
	depth := 0
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case '"':
			if _, ok := w.str(); !ok {
				w.bad = true
				return
			}
			if depth == 0 {
				return
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return // the end of the enclosing value
			}
			depth--
			if depth == 0 {
				w.i++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		w.i++
	}
}
