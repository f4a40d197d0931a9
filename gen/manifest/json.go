package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// jsonReader builds a yaml.Node tree from strict JSON so that JSON manifests
// share every later step with YAML ones, with positions measured on the
// JSON text itself.
type jsonReader struct {
	data []byte
	dec  *json.Decoder
	// incremental position cursor: byte offset, line and column at it.
	off, line, col int
	depth          int
	nodes          int
}

// parseJSON parses one strict JSON value into a node tree.
func parseJSON(data []byte) (root *yaml.Node, errs []Error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	r := &jsonReader{data: data, dec: json.NewDecoder(bytes.NewReader(data)), line: 1, col: 1}
	r.dec.UseNumber()
	root, err := r.node()
	if err != nil {
		return nil, []Error{r.syntaxError(err)}
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		l, c := r.position(int(r.dec.InputOffset()))
		if err == nil {
			return nil, []Error{{Line: l, Column: c, Message: "invalid JSON: more than one value; a manifest holds exactly one family"}}
		}
		return nil, []Error{r.syntaxError(err)}
	}
	return root, nil
}

// errTooDeep stops parsing at MaxDepth, errTooMany at MaxNodes.
var (
	errTooDeep = fmt.Errorf("document is nested deeper than %d levels (max depth limit)", MaxDepth)
	errTooMany = fmt.Errorf("document has more than %d nodes (max nodes limit)", MaxNodes)
)

func (r *jsonReader) syntaxError(err error) Error {
	off := int(r.dec.InputOffset())
	if !errors.Is(err, errTooDeep) && !errors.Is(err, errTooMany) {
		// A Decoder's syntax error offsets are relative to the token it
		// was reading; a whole-input scan gives the absolute one.
		var v any
		var se *json.SyntaxError
		if uerr := json.Unmarshal(r.data, &v); errors.As(uerr, &se) {
			err = se
			off = int(se.Offset)
			if off > 0 && !strings.Contains(se.Error(), "unexpected end") {
				off-- // Offset counts the offending byte
			}
		}
	}
	l, c := r.position(off)
	msg := err.Error()
	switch {
	case errors.Is(err, errTooDeep), errors.Is(err, errTooMany):
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(msg, "unexpected end of JSON input"):
		msg = "invalid JSON: unexpected end of file"
	default:
		msg = "invalid JSON: " + strings.TrimPrefix(msg, "json: ")
	}
	return Error{Line: l, Column: c, Message: msg}
}

// position returns the line and column of byte offset off. Offsets must not
// go backwards by more than the current line, which holds for a decoder's
// token stream; otherwise it recounts from the start.
func (r *jsonReader) position(off int) (int, int) {
	if off > len(r.data) {
		off = len(r.data)
	}
	if off < r.off {
		r.off, r.line, r.col = 0, 1, 1
	}
	for r.off < off {
		c, n := utf8.DecodeRune(r.data[r.off:])
		r.off += n
		if c == '\n' {
			r.line++
			r.col = 1
		} else {
			r.col++
		}
	}
	return r.line, r.col
}

// tokenStart returns the offset of the next token: the decoder's input
// offset moved past white space and the ',' and ':' separators.
func (r *jsonReader) tokenStart() int {
	off := int(r.dec.InputOffset())
	for off < len(r.data) {
		switch r.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// node reads one JSON value.
func (r *jsonReader) node() (*yaml.Node, error) {
	if r.nodes++; r.nodes > MaxNodes {
		return nil, errTooMany
	}
	start := r.tokenStart()
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	line, col := r.position(start)
	n := &yaml.Node{Line: line, Column: col}
	switch t := tok.(type) {
	case json.Delim:
		r.depth++
		if r.depth > MaxDepth {
			return nil, errTooDeep
		}
		n.Style = yaml.FlowStyle
		if t == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
			for r.dec.More() {
				kstart := r.tokenStart()
				ktok, err := r.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := ktok.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				kl, kc := r.position(kstart)
				k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Style: yaml.DoubleQuotedStyle, Line: kl, Column: kc}
				v, err := r.node()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, k, v)
			}
		} else {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
			for r.dec.More() {
				v, err := r.node()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
		}
		if _, err := r.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		r.depth--
	case string:
		n.Kind, n.Tag, n.Value, n.Style = yaml.ScalarNode, "!!str", t, yaml.DoubleQuotedStyle
	case json.Number:
		n.Kind, n.Value = yaml.ScalarNode, string(t)
		n.Tag = "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			n.Tag = "!!float"
		}
	case bool:
		n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!bool", fmt.Sprint(t)
	case nil:
		n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!null", "null"
	}
	return n, nil
}
