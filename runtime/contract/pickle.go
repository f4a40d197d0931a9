package contract

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Opaque is a value the code of an archive holds that this package does
// not give as a Go value: a tensor or object constant, or an expression it
// does not evaluate (an enum member, a call).
type Opaque struct {
	// Code is the value as the code writes it: "CONSTANTS.c0",
	// "__torch__.Color.RED".
	Code string
	// Tensor says the value is a tensor.
	Tensor bool
}

// String writes the value as the code does, or "<tensor>" for a tensor.
func (o Opaque) String() string {
	if o.Tensor {
		return "<tensor>"
	}
	return o.Code
}

// Limits of readConstants.
const (
	// maxPickleDepth is the deepest nesting of lists, tuples and dicts
	// converted to Go values.
	maxPickleDepth = 64
	// maxPickleValues is the most values the conversion visits: a pickle
	// can refer to one list many times (BINGET), so that a few bytes stand
	// for a huge tree.
	maxPickleValues = 1 << 20
)

// Values on the unpickler's stack. Lists and dicts are pointers, as the
// memo shares them and APPENDS / SETITEMS change them in place.
type (
	pList   struct{ items []any }
	pDict   struct{ keys, values []any }
	pTuple  []any
	pGlobal struct{ module, name string }
	// pOpaque is a tensor, a persistent reference or an object.
	pOpaque struct{ tensor bool }
)

// readConstants reads an archive's constants.pkl: the tuple of constants
// its code names CONSTANTS.c0, CONSTANTS.c1, .... It understands the
// opcodes torch.jit's pickler writes; str, int, float, bool, None, lists,
// tuples and dicts become Go values in the engine's value form (see
// engine.Module), tensors and objects Opaque values.
func readConstants(data []byte) ([]any, error) {
	var (
		stack []any
		marks []int
		memo  = map[uint32]any{}
	)
	pop := func() (any, error) {
		if len(stack) == 0 || (len(marks) > 0 && len(stack) == marks[len(marks)-1]) {
			return nil, errors.New("pop from an empty stack")
		}
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return v, nil
	}
	popMark := func() ([]any, error) {
		if len(marks) == 0 {
			return nil, errors.New("no MARK")
		}
		m := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		items := append([]any(nil), stack[m:]...)
		stack = stack[:m]
		return items, nil
	}
	i := 0
	need := func(n int) ([]byte, error) {
		if n < 0 || n > len(data)-i {
			return nil, fmt.Errorf("truncated: %d bytes wanted at offset %d", n, i)
		}
		b := data[i : i+n]
		i += n
		return b, nil
	}
	line := func() (string, error) {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			return "", fmt.Errorf("unterminated line at offset %d", i)
		}
		s := string(data[i : i+j])
		i += j + 1
		return s, nil
	}
	for i < len(data) {
		at := i
		op := data[i]
		i++
		var err error
		fail := func(e error) error { return fmt.Errorf("offset %d (opcode %q): %w", at, op, e) }
		switch op {
		case 0x80: // PROTO
			_, err = need(1)
		case '.': // STOP
			v, err := pop()
			if err != nil {
				return nil, fail(err)
			}
			t, ok := v.(pTuple)
			if !ok {
				return nil, fail(fmt.Errorf("the constants are a %T, not a tuple", v))
			}
			budget := maxPickleValues
			out := make([]any, len(t))
			for k, x := range t {
				if out[k], err = goValue(x, 0, &budget); err != nil {
					return nil, fmt.Errorf("constant %d: %w", k, err)
				}
			}
			return out, nil
		case '(': // MARK
			marks = append(marks, len(stack))
		case 'N':
			stack = append(stack, nil)
		case 0x88:
			stack = append(stack, true)
		case 0x89:
			stack = append(stack, false)
		case 'K': // BININT1
			var b []byte
			if b, err = need(1); err == nil {
				stack = append(stack, int64(b[0]))
			}
		case 'M': // BININT2
			var b []byte
			if b, err = need(2); err == nil {
				stack = append(stack, int64(binary.LittleEndian.Uint16(b)))
			}
		case 'J': // BININT
			var b []byte
			if b, err = need(4); err == nil {
				stack = append(stack, int64(int32(binary.LittleEndian.Uint32(b))))
			}
		case 0x8a: // LONG1
			var b []byte
			if b, err = need(1); err != nil {
				break
			}
			n := int(b[0])
			if b, err = need(n); err != nil {
				break
			}
			if n > 8 {
				err = fmt.Errorf("a %d-byte integer", n)
				break
			}
			var u uint64
			for k := n - 1; k >= 0; k-- {
				u = u<<8 | uint64(b[k])
			}
			if n > 0 && n < 8 && b[n-1]&0x80 != 0 {
				u |= ^uint64(0) << (8 * n) // sign-extend
			}
			stack = append(stack, int64(u))
		case 'G': // BINFLOAT, big-endian
			var b []byte
			if b, err = need(8); err == nil {
				stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case 'X', 0x8c: // BINUNICODE, SHORT_BINUNICODE
			var b []byte
			n := 0
			if op == 'X' {
				if b, err = need(4); err != nil {
					break
				}
				n = int(binary.LittleEndian.Uint32(b))
			} else {
				if b, err = need(1); err != nil {
					break
				}
				n = int(b[0])
			}
			if b, err = need(n); err == nil {
				stack = append(stack, string(b))
			}
		case ']':
			stack = append(stack, &pList{})
		case ')':
			stack = append(stack, pTuple{})
		case '}':
			stack = append(stack, &pDict{})
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			base := 0
			if len(marks) > 0 {
				base = marks[len(marks)-1]
			}
			if len(stack)-base < n {
				err = errors.New("too few values on the stack")
				break
			}
			t := append(pTuple(nil), stack[len(stack)-n:]...)
			stack = append(stack[:len(stack)-n], t)
		case 't': // TUPLE
			var items []any
			if items, err = popMark(); err == nil {
				stack = append(stack, pTuple(items))
			}
		case 'l': // LIST
			var items []any
			if items, err = popMark(); err == nil {
				stack = append(stack, &pList{items: items})
			}
		case 'a', 'e': // APPEND, APPENDS
			var items []any
			if op == 'a' {
				var v any
				if v, err = pop(); err != nil {
					break
				}
				items = []any{v}
			} else if items, err = popMark(); err != nil {
				break
			}
			if len(stack) == 0 {
				err = errors.New("append to nothing")
				break
			}
			l, ok := stack[len(stack)-1].(*pList)
			if !ok {
				err = fmt.Errorf("append to a %T", stack[len(stack)-1])
				break
			}
			l.items = append(l.items, items...)
		case 's', 'u', 'd': // SETITEM, SETITEMS, DICT
			var items []any
			if op == 's' {
				if len(stack) < 2 {
					err = errors.New("too few values on the stack")
					break
				}
				items = append([]any(nil), stack[len(stack)-2:]...)
				stack = stack[:len(stack)-2]
			} else if items, err = popMark(); err != nil {
				break
			}
			if len(items)%2 != 0 {
				err = errors.New("an odd number of keys and values")
				break
			}
			if op == 'd' {
				stack = append(stack, &pDict{})
			}
			if len(stack) == 0 {
				err = errors.New("set items of nothing")
				break
			}
			d, ok := stack[len(stack)-1].(*pDict)
			if !ok {
				err = fmt.Errorf("set items of a %T", stack[len(stack)-1])
				break
			}
			for k := 0; k < len(items); k += 2 {
				d.keys = append(d.keys, items[k])
				d.values = append(d.values, items[k+1])
			}
		case 'c': // GLOBAL
			var mod, name string
			if mod, err = line(); err != nil {
				break
			}
			if name, err = line(); err == nil {
				stack = append(stack, pGlobal{mod, name})
			}
		case 'R': // REDUCE
			var args, fn any
			if args, err = pop(); err != nil {
				break
			}
			if fn, err = pop(); err != nil {
				break
			}
			stack = append(stack, reduce(fn, args))
		case 'Q': // BINPERSID
			if _, err = pop(); err == nil {
				stack = append(stack, pOpaque{})
			}
		case 0x81: // NEWOBJ
			if _, err = pop(); err != nil {
				break
			}
			if _, err = pop(); err == nil {
				stack = append(stack, pOpaque{})
			}
		case 'b': // BUILD
			if _, err = pop(); err != nil {
				break
			}
			if len(stack) == 0 {
				err = errors.New("build nothing")
				break
			}
			if _, ok := stack[len(stack)-1].(pOpaque); !ok {
				stack[len(stack)-1] = pOpaque{} // an object given its state
			}
		case 'q', 'r': // BINPUT, LONG_BINPUT
			var b []byte
			var k uint32
			if op == 'q' {
				if b, err = need(1); err != nil {
					break
				}
				k = uint32(b[0])
			} else {
				if b, err = need(4); err != nil {
					break
				}
				k = binary.LittleEndian.Uint32(b)
			}
			if len(stack) == 0 || (len(marks) > 0 && len(stack) == marks[len(marks)-1]) {
				err = errors.New("memoize nothing")
				break
			}
			memo[k] = stack[len(stack)-1]
		case 'h', 'j': // BINGET, LONG_BINGET
			var b []byte
			var k uint32
			if op == 'h' {
				if b, err = need(1); err != nil {
					break
				}
				k = uint32(b[0])
			} else {
				if b, err = need(4); err != nil {
					break
				}
				k = binary.LittleEndian.Uint32(b)
			}
			v, ok := memo[k]
			if !ok {
				err = fmt.Errorf("memo entry %d is not set", k)
				break
			}
			stack = append(stack, v)
		case '0': // POP
			_, err = pop()
		case '1': // POP_MARK
			_, err = popMark()
		case '2': // DUP
			if len(stack) == 0 {
				err = errors.New("dup nothing")
				break
			}
			stack = append(stack, stack[len(stack)-1])
		default:
			err = errors.New("an opcode torch.jit's pickler does not write")
		}
		if err != nil {
			return nil, fail(err)
		}
	}
	return nil, errors.New("no STOP opcode")
}

// reduce applies a pickled call: torch.jit's type tags and list builders
// return their first argument, a tensor rebuild is an opaque tensor, an
// OrderedDict() an empty dict, anything else an opaque object.
func reduce(fn, args any) any {
	g, ok := fn.(pGlobal)
	t, _ := args.(pTuple)
	if !ok {
		return pOpaque{}
	}
	switch {
	case g.module == "torch.jit._pickle" && len(t) >= 1 &&
		(g.name == "restore_type_tag" || strings.HasPrefix(g.name, "build_")):
		return t[0]
	case g.module == "torch._utils" && strings.HasPrefix(g.name, "_rebuild_"):
		return pOpaque{tensor: true}
	case g.module == "collections" && g.name == "OrderedDict" && len(t) == 0:
		return &pDict{}
	}
	return pOpaque{}
}

// goValue converts an unpickled value to the engine's value form, opaque
// values to pOpaque. budget counts the values visited.
func goValue(v any, depth int, budget *int) (any, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("more than %d values", maxPickleValues)
	}
	if depth > maxPickleDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxPickleDepth)
	}
	list := func(items []any) ([]any, error) {
		out := make([]any, len(items))
		for k, x := range items {
			var err error
			if out[k], err = goValue(x, depth+1, budget); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return x, nil
	case *pList:
		return list(x.items)
	case pTuple:
		return list(x)
	case *pDict:
		out := make(map[string]any, len(x.keys))
		for k, key := range x.keys {
			s, ok := key.(string)
			if !ok {
				return Opaque{Code: "<object>"}, nil // a dict without str keys: not a value Go receives
			}
			val, err := goValue(x.values[k], depth+1, budget)
			if err != nil {
				return nil, err
			}
			out[s] = val
		}
		return out, nil
	case pOpaque:
		return Opaque{Code: "<object>", Tensor: x.tensor}, nil
	}
	return Opaque{Code: "<object>"}, nil
}
