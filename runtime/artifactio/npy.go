package artifactio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// npyDescr maps runtime dtypes to NumPy type strings. bfloat16 has no NumPy
// type: it is written as float32 ('<f4'), which holds every value exactly.
var npyDescr = map[tensor.DType]string{
	tensor.Float32:  "<f4",
	tensor.Float16:  "<f2",
	tensor.BFloat16: "<f4",
	tensor.Int64:    "<i8",
	tensor.Int32:    "<i4",
	tensor.Uint8:    "|u1",
	tensor.Bool:     "|b1",
}

// npyHeader returns the complete header (magic, version 1.0, length and the
// padded dict) exactly as NumPy's np.save writes it.
func npyHeader(descr string, shape []int64) ([]byte, error) {
	var sb strings.Builder
	sb.WriteString("{'descr': '")
	sb.WriteString(descr)
	sb.WriteString("', 'fortran_order': False, 'shape': (")
	for i, d := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(d, 10))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	// NumPy leaves room to grow the first dimension in place.
	if len(shape) > 0 {
		sb.WriteString(strings.Repeat(" ", max(0, 21-len(strconv.FormatInt(shape[0], 10)))))
	}
	dict := sb.String()
	hlen := len(dict) + 1 // the final newline
	pad := 64 - (len(npyMagic)+2+2+hlen)%64
	total := hlen + pad
	if total > math.MaxUint16 {
		return nil, fmt.Errorf("npy: header of %d bytes is too long for format 1.0", total)
	}
	out := make([]byte, 0, len(npyMagic)+4+total)
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(total))
	out = append(out, dict...)
	out = append(out, bytes.Repeat([]byte{' '}, pad)...)
	out = append(out, '\n')
	return out, nil
}

// EncodeNPY writes a tensor as a NumPy .npy file (format 1.0, C order,
// little-endian): float32 as '<f4', float16 as '<f2', bfloat16 converted to
// '<f4', int64 '<i8', int32 '<i4', uint8 '|u1', bool '|b1'. The bytes equal
// what np.save writes for the same array.
func EncodeNPY(w io.Writer, t *tensor.Tensor) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	descr, ok := npyDescr[t.DType]
	if !ok {
		return fmt.Errorf("npy: no NumPy type for dtype %s", t.DType)
	}
	hdr, err := npyHeader(descr, t.Shape)
	if err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	switch t.DType {
	case tensor.BFloat16:
		buf := make([]byte, 0, 4096)
		for i := 0; i < len(t.Data); i += 2 {
			f := BFloat16ToFloat32(binary.LittleEndian.Uint16(t.Data[i:]))
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			if len(buf) == cap(buf) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		_, err = w.Write(buf)
		return err
	case tensor.Bool:
		buf := make([]byte, len(t.Data))
		for i, b := range t.Data {
			if b != 0 {
				buf[i] = 1
			}
		}
		_, err = w.Write(buf)
		return err
	}
	_, err = w.Write(t.Data)
	return err
}

// WriteNPY writes a tensor as a .npy file, atomically (see EncodeNPY).
func WriteNPY(path string, t *tensor.Tensor) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return WriteFileAtomic(path, func(w io.Writer) error { return EncodeNPY(w, t) })
}

// ReadNPY reads a .npy file (see DecodeNPY).
func ReadNPY(path string) (*tensor.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := DecodeNPY(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// maxNPYBytes bounds the data a .npy header may announce (1 TiB).
const maxNPYBytes = 1 << 40

// DecodeNPY reads a NumPy .npy file (format 1.0, 2.0 or 3.0) holding a C-order
// array of float32, float16, int64, int32, uint8 or bool in either byte
// order, and returns it as a little-endian host tensor. Other dtypes,
// Fortran order, truncated data and trailing bytes are errors.
func DecodeNPY(r io.Reader) (*tensor.Tensor, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading magic: %w", noEOF(err))
	}
	if string(pre[:6]) != npyMagic {
		return nil, fmt.Errorf("npy: not a .npy file (bad magic %q)", pre[:6])
	}
	var hlen int
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > 1<<20 {
			return nil, fmt.Errorf("npy: header length %d is implausibly large", n)
		}
		hlen = int(n)
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d (known: 1.0, 2.0, 3.0)", pre[6], pre[7])
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("npy: reading %d-byte header: %w", hlen, noEOF(err))
	}
	descr, fortran, shape, err := parseNPYHeader(string(hdr))
	if err != nil {
		return nil, fmt.Errorf("npy: header: %w", err)
	}
	if fortran {
		return nil, errors.New("npy: Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)")
	}
	dt, size, swap, err := npyDType(descr)
	if err != nil {
		return nil, err
	}
	want := int64(size)
	for _, d := range shape {
		if d != 0 && want > maxNPYBytes/d {
			return nil, fmt.Errorf("npy: shape %v holds more than %d bytes", shape, int64(maxNPYBytes))
		}
		want *= d
	}
	data, err := io.ReadAll(io.LimitReader(r, want+1))
	if err != nil {
		return nil, fmt.Errorf("npy: reading data: %w", err)
	}
	if int64(len(data)) < want {
		return nil, fmt.Errorf("npy: data is truncated: shape %v of %s needs %d bytes, file has %d", shape, descr, want, len(data))
	}
	if int64(len(data)) > want {
		return nil, fmt.Errorf("npy: %d bytes of data expected for shape %v of %s, the file has more", want, shape, descr)
	}
	if swap {
		for i := 0; i < len(data); i += size {
			slicesReverse(data[i : i+size])
		}
	}
	if dt == tensor.Bool {
		for i, b := range data {
			if b != 0 {
				data[i] = 1
			}
		}
	}
	return &tensor.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

func slicesReverse(b []byte) {
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

// noEOF turns a bare EOF into ErrUnexpectedEOF: a short file is truncated.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// npyDType maps a NumPy type string to a runtime dtype, its size and whether
// its bytes must be swapped to little-endian.
func npyDType(descr string) (tensor.DType, int, bool, error) {
	if len(descr) == 3 {
		order, kind := descr[0], descr[1:]
		var dt tensor.DType
		switch kind {
		case "f4":
			dt = tensor.Float32
		case "f2":
			dt = tensor.Float16
		case "i8":
			dt = tensor.Int64
		case "i4":
			dt = tensor.Int32
		case "u1":
			dt = tensor.Uint8
		case "b1":
			dt = tensor.Bool
		}
		size := dt.Size()
		if dt != "" {
			switch {
			case order == '<' || order == '|' || order == '=':
				return dt, size, false, nil
			case order == '>':
				return dt, size, size > 1, nil
			}
		}
	}
	return "", 0, false, fmt.Errorf("npy: unsupported dtype %q (supported: <f4, <f2, <i8, <i4, |u1, |b1, in either byte order)", descr)
}

// parseNPYHeader parses the Python dict literal of a .npy header.
func parseNPYHeader(s string) (descr string, fortran bool, shape []int64, err error) {
	p := &pyParser{s: s}
	p.space()
	if !p.eat('{') {
		return "", false, nil, p.fail("want '{'")
	}
	seen := map[string]bool{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return "", false, nil, err
		}
		if seen[key] {
			return "", false, nil, fmt.Errorf("key %q given twice", key)
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return "", false, nil, p.fail("want ':' after key")
		}
		p.space()
		switch key {
		case "descr":
			if descr, err = p.str(); err != nil {
				return "", false, nil, err
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				fortran = true
			case p.word("False"):
				fortran = false
			default:
				return "", false, nil, p.fail("fortran_order wants True or False")
			}
		case "shape":
			if shape, err = p.tuple(); err != nil {
				return "", false, nil, err
			}
		default:
			return "", false, nil, fmt.Errorf("unknown key %q (known: descr, fortran_order, shape)", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return "", false, nil, p.fail("want ',' or '}'")
		}
		break
	}
	p.space()
	if p.i != len(p.s) {
		return "", false, nil, p.fail("unexpected text after the dict")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", false, nil, fmt.Errorf("missing key %q", k)
		}
	}
	if shape == nil {
		shape = []int64{}
	}
	return descr, fortran, shape, nil
}

// pyParser reads the small Python literal subset .npy headers use.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) fail(msg string) error { return fmt.Errorf("%s at byte %d", msg, p.i) }

func (p *pyParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *pyParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.fail("want a quoted string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", p.fail("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", p.fail("escapes in strings are not supported")
	}
	p.i += end + 2
	return v, nil
}

func (p *pyParser) tuple() ([]int64, error) {
	if !p.eat('(') {
		return nil, p.fail("shape wants a tuple")
	}
	out := []int64{}
	for {
		p.space()
		if p.eat(')') {
			return out, nil
		}
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if start == p.i {
			return nil, p.fail("shape wants non-negative integers")
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil {
			return nil, p.fail("shape dimension out of range")
		}
		p.eat('L') // Python 2 long suffix
		out = append(out, n)
		if len(out) > 64 {
			return nil, p.fail("more than 64 dimensions")
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat(')') {
			return nil, p.fail("want ',' or ')' in shape")
		}
		return out, nil
	}
}
