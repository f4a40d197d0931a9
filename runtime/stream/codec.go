package stream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// MaxSnapshotBytes bounds an encoded snapshot (MarshalBinary's output,
// a token's payload): 64 MiB. Encoding a larger one and decoding one that
// claims more are refused with ErrSnapshotTooLarge.
const MaxSnapshotBytes = 64 << 20

// snapshotMagic and snapshotVersion open MarshalBinary's output.
const (
	snapshotMagic   = "WFSNAP"
	snapshotVersion = 1
	maxDepth        = 32 // nesting of values, as engine.ValueOf
)

// ErrSnapshotTooLarge is matched (errors.Is) by the error for a snapshot
// whose encoding exceeds MaxSnapshotBytes.
var ErrSnapshotTooLarge = errors.New("stream: snapshot too large")

// ErrSnapshotFormat is matched (errors.Is) by the error for bytes that are
// not a snapshot of a version this package reads (corrupt, truncated,
// trailing bytes, another format version, values out of range).
var ErrSnapshotFormat = errors.New("stream: malformed snapshot")

// ErrSnapshotValue is matched (errors.Is) by the error for a snapshot
// whose state or params hold a value that is not an engine value.
var ErrSnapshotValue = errors.New("stream: snapshot value is not an engine value")

// value tags of the encoding.
const (
	tagNil byte = iota
	tagString
	tagInt
	tagFloat
	tagFalse
	tagTrue
	tagTensor
	tagList
	tagMap
)

// MarshalBinary encodes the snapshot: "WFSNAP", a version byte (1), then
// its fields (integers as varints, floats as IEEE bits, strings and
// tensor bytes length-prefixed, map keys sorted, so equal snapshots encode
// equally). State and params must be engine values (ErrSnapshotValue):
// tensors keep their dtype, shape and bytes. The result is at most
// MaxSnapshotBytes (ErrSnapshotTooLarge). It is not signed: see Seal.
func (snap Snapshot) MarshalBinary() ([]byte, error) {
	b := append([]byte(snapshotMagic), snapshotVersion)
	var err error
	for _, s := range []string{snap.Origin.Family, snap.Origin.Variant, snap.Origin.Checkpoint, snap.Origin.Task} {
		b = appendString(b, s)
	}
	var params any
	if snap.Origin.Params != nil {
		params = snap.Origin.Params
	}
	if b, err = appendValue(b, params, 0); err != nil {
		return nil, fmt.Errorf("stream: snapshot params: %w", err)
	}
	b = binary.AppendVarint(b, int64(snap.Next))
	b = binary.AppendVarint(b, snap.NextFrame)
	for _, d := range snap.FrameSize {
		b = binary.AppendVarint(b, d)
	}
	sp := snap.Spec
	b = binary.AppendVarint(b, int64(sp.FPS))
	b = binary.AppendVarint(b, int64(sp.FirstChunkFrames))
	b = binary.AppendVarint(b, int64(sp.SteadyChunkFrames))
	b = binary.AppendUvarint(b, uint64(len(sp.Controls)))
	for _, c := range sp.Controls {
		b = appendString(b, c)
	}
	b = appendString(b, sp.Transport)
	b = appendBool(b, sp.Stateful)
	b = appendControls(b, snap.Controls)
	if b, err = appendValue(b, snap.State, 0); err != nil {
		return nil, fmt.Errorf("stream: snapshot state: %w", err)
	}
	b = binary.AppendVarint(b, int64(snap.Log.Start))
	b = binary.AppendVarint(b, int64(snap.Log.End))
	b = binary.AppendUvarint(b, uint64(len(snap.Log.Changes)))
	for _, c := range snap.Log.Changes {
		b = binary.AppendVarint(b, int64(c.From))
		b = appendControls(b, c.Controls)
	}
	b = appendBool(b, snap.Done)
	if len(b) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrSnapshotTooLarge, len(b), MaxSnapshotBytes)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendControls(b []byte, c Controls) []byte {
	b = binary.AppendUvarint(b, uint64(len(c)))
	for _, name := range slices.Sorted(maps.Keys(c)) {
		b = appendString(b, name)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c[name]))
	}
	return b
}

// appendValue encodes an engine value.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrSnapshotValue, maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, tagNil), nil
	case string:
		return appendString(append(b, tagString), x), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x)), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case *tensor.Tensor:
		if x == nil {
			return append(b, tagNil), nil
		}
		if err := x.Check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSnapshotValue, err)
		}
		b = appendString(append(b, tagTensor), string(x.DType))
		b = binary.AppendUvarint(b, uint64(len(x.Shape)))
		for _, d := range x.Shape {
			b = binary.AppendUvarint(b, uint64(d))
		}
		return append(b, x.Data...), nil
	case []any:
		b = binary.AppendUvarint(append(b, tagList), uint64(len(x)))
		var err error
		for i, e := range x {
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return b, nil
	case map[string]any:
		b = binary.AppendUvarint(append(b, tagMap), uint64(len(x)))
		var err error
		for _, k := range slices.Sorted(maps.Keys(x)) {
			b = appendString(b, k)
			if b, err = appendValue(b, x[k], depth+1); err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: %T (want nil, string, int64, float64, bool, *tensor.Tensor, []any or map[string]any)", ErrSnapshotValue, v)
}

// decoder reads the encoding; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrSnapshotFormat, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit an int in [0, math.MaxInt32].
func (d *decoder) int(what string) int {
	v := d.varint()
	if v < 0 || v > math.MaxInt32 {
		d.fail("%s %d out of range", what, v)
		return 0
	}
	return int(v)
}

// count reads a length of items of at least min bytes each, bounded by
// what is left.
func (d *decoder) count(min int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.fail("length %d exceeds the %d bytes left", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) string() string { return string(d.bytes(d.count(1))) }

func (d *decoder) bool() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad boolean")
	return false
}

func (d *decoder) float() float64 {
	b := d.bytes(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

func (d *decoder) controls() Controls {
	n := d.count(9)
	c := make(Controls, n)
	for range n {
		name := d.string()
		if _, dup := c[name]; dup && d.err == nil {
			d.fail("control %q twice", name)
		}
		c[name] = d.float()
	}
	return c
}

func (d *decoder) value(depth int) any {
	if depth > maxDepth {
		d.fail("value nested deeper than %d levels", maxDepth)
		return nil
	}
	switch tag := d.byte1(); tag {
	case tagNil:
		return nil
	case tagString:
		return d.string()
	case tagInt:
		return d.varint()
	case tagFloat:
		return d.float()
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagTensor:
		dt := tensor.DType(d.string())
		if d.err == nil && !dt.Valid() {
			d.fail("tensor dtype %q", dt)
			return nil
		}
		rank := d.count(1)
		shape := make([]int64, rank)
		size := uint64(dt.Size())
		for i := range shape {
			v := d.uvarint()
			if v > 0 && size > uint64(MaxSnapshotBytes)/v {
				d.fail("tensor shape too large")
				return nil
			}
			size *= v
			shape[i] = int64(v)
		}
		data := d.bytes(int(min(size, uint64(MaxSnapshotBytes)+1)))
		if d.err != nil {
			return nil
		}
		return &tensor.Tensor{DType: dt, Shape: shape, Data: slices.Clone(data)}
	case tagList:
		n := d.count(1)
		out := make([]any, n)
		for i := range out {
			out[i] = d.value(depth + 1)
		}
		return out
	case tagMap:
		n := d.count(2)
		out := make(map[string]any, n)
		for range n {
			k := d.string()
			if _, dup := out[k]; dup && d.err == nil {
				d.fail("key %q twice", k)
			}
			out[k] = d.value(depth + 1)
		}
		return out
	default:
		d.fail("value tag %d", tag)
		return nil
	}
}

// UnmarshalBinary decodes what MarshalBinary encoded and checks the result
// (Snapshot.Check). Bytes longer than MaxSnapshotBytes are refused
// (ErrSnapshotTooLarge) before anything is decoded; anything else wrong is
// an error matching ErrSnapshotFormat (or the check's). On error snap is
// unchanged.
func (snap *Snapshot) UnmarshalBinary(data []byte) error {
	if len(data) > MaxSnapshotBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrSnapshotTooLarge, len(data), MaxSnapshotBytes)
	}
	if len(data) < len(snapshotMagic)+1 || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return fmt.Errorf("%w: not a snapshot (no %q header)", ErrSnapshotFormat, snapshotMagic)
	}
	if v := data[len(snapshotMagic)]; v != snapshotVersion {
		return fmt.Errorf("%w: format version %d, this build reads version %d", ErrSnapshotFormat, v, snapshotVersion)
	}
	d := &decoder{b: data[len(snapshotMagic)+1:]}
	var s Snapshot
	s.Origin.Family, s.Origin.Variant, s.Origin.Checkpoint, s.Origin.Task = d.string(), d.string(), d.string(), d.string()
	switch p := d.value(0).(type) {
	case nil:
	case map[string]any:
		s.Origin.Params = p
	default:
		d.fail("params are %T, want a map", p)
	}
	s.Next = d.int("next chunk")
	s.NextFrame = d.varint()
	for i := range s.FrameSize {
		s.FrameSize[i] = d.varint()
	}
	s.Spec = wfspec.RealtimeSpec{FPS: d.int("fps"), FirstChunkFrames: d.int("first chunk frames"), SteadyChunkFrames: d.int("steady chunk frames")}
	if n := d.count(1); n > 0 {
		s.Spec.Controls = make([]string, n)
		for i := range s.Spec.Controls {
			s.Spec.Controls[i] = d.string()
		}
	} else {
		s.Spec.Controls = []string{}
	}
	s.Spec.Transport = d.string()
	s.Spec.Stateful = d.bool()
	s.Controls = d.controls()
	s.State = d.value(0)
	s.Log.Start, s.Log.End = d.int("log start"), d.int("log end")
	if n := d.count(2); n > 0 {
		s.Log.Changes = make([]ControlChange, n)
		for i := range s.Log.Changes {
			s.Log.Changes[i] = ControlChange{From: d.int("log change"), Controls: d.controls()}
		}
	}
	s.Done = d.bool()
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the snapshot", len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	if err := s.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	*snap = s
	return nil
}

// Token errors: Open refuses a token with one of these (errors.Is).
var (
	// ErrTokenTruncated: the token is shorter than its header says.
	ErrTokenTruncated = errors.New("stream: snapshot token truncated")
	// ErrTokenForeignKey: the token was sealed with another key.
	ErrTokenForeignKey = errors.New("stream: snapshot token sealed with another key")
	// ErrTokenTampered: the token's bytes do not match its signature.
	ErrTokenTampered = errors.New("stream: snapshot token tampered with")
	// ErrTokenFormat: not a token, or a token version this build does not read.
	ErrTokenFormat = errors.New("stream: not a snapshot token")
	// ErrKey: the key is shorter than MinKeyBytes.
	ErrKey = errors.New("stream: snapshot key too short")
)

// MinKeyBytes is the shortest key Seal and Open take.
const MinKeyBytes = 16

const (
	tokenMagic   = "WFST"
	tokenVersion = 1
	keyIDBytes   = 8
	tokenHeader  = len(tokenMagic) + 1 + keyIDBytes + 4 // magic, version, key id, payload length
)

// keyID is a public fingerprint of key: the first 8 bytes of
// SHA-256("wfgen snapshot key id\x00" + key), so that a token sealed with
// another key is told from a tampered one.
func keyID(key []byte) []byte {
	h := sha256.New()
	h.Write([]byte("wfgen snapshot key id\x00"))
	h.Write(key)
	return h.Sum(nil)[:keyIDBytes]
}

// Seal encodes snap (MarshalBinary) into a signed token: "WFST", a version
// byte (1), the key's 8-byte fingerprint, the payload length (uint32 big
// endian), the payload, and HMAC-SHA256 with key over everything before
// it. The token is signed, not encrypted: whoever holds it can read the
// state. key must be at least MinKeyBytes long.
func Seal(snap Snapshot, key []byte) ([]byte, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrKey, len(key), MinKeyBytes)
	}
	payload, err := snap.MarshalBinary()
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 0, tokenHeader+len(payload)+sha256.Size)
	tok = append(tok, tokenMagic...)
	tok = append(tok, tokenVersion)
	tok = append(tok, keyID(key)...)
	tok = binary.BigEndian.AppendUint32(tok, uint32(len(payload)))
	tok = append(tok, payload...)
	mac := hmac.New(sha256.New, key)
	mac.Write(tok)
	return mac.Sum(tok), nil
}

// Open verifies a token Seal made with key and decodes its snapshot. It
// refuses, before decoding anything: a token too short for its header or
// payload (ErrTokenTruncated), another key's (ErrTokenForeignKey), bytes
// that do not match the signature (ErrTokenTampered), something else or
// another version (ErrTokenFormat), a payload over MaxSnapshotBytes
// (ErrSnapshotTooLarge). The snapshot's origin is checked when it is
// restored (ErrForeignModel).
func Open(token, key []byte) (Snapshot, error) {
	if len(key) < MinKeyBytes {
		return Snapshot{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrKey, len(key), MinKeyBytes)
	}
	payload, err := framed(token)
	if err != nil {
		return Snapshot{}, err
	}
	if !hmac.Equal(token[len(tokenMagic)+1:len(tokenMagic)+1+keyIDBytes], keyID(key)) {
		return Snapshot{}, ErrTokenForeignKey
	}
	body := token[:len(token)-sha256.Size]
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), token[len(body):]) {
		return Snapshot{}, ErrTokenTampered
	}
	var snap Snapshot
	if err := snap.UnmarshalBinary(payload); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// framed checks a token's frame — magic, version, the payload length
// against the bound and the bytes there are — and returns its payload.
func framed(token []byte) ([]byte, error) {
	if len(token) < len(tokenMagic)+1 {
		if string(token) == tokenMagic[:len(token)] {
			return nil, fmt.Errorf("%w: %d bytes", ErrTokenTruncated, len(token))
		}
		return nil, ErrTokenFormat
	}
	if string(token[:len(tokenMagic)]) != tokenMagic {
		return nil, ErrTokenFormat
	}
	if v := token[len(tokenMagic)]; v != tokenVersion {
		return nil, fmt.Errorf("%w: token version %d, this build reads version %d", ErrTokenFormat, v, tokenVersion)
	}
	if len(token) < tokenHeader {
		return nil, fmt.Errorf("%w: %d bytes", ErrTokenTruncated, len(token))
	}
	n := binary.BigEndian.Uint32(token[tokenHeader-4:])
	if n > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: the token claims %d bytes, the limit is %d", ErrSnapshotTooLarge, n, MaxSnapshotBytes)
	}
	want := tokenHeader + int(n) + sha256.Size
	if len(token) < want {
		return nil, fmt.Errorf("%w: %d bytes, its header says %d", ErrTokenTruncated, len(token), want)
	}
	if len(token) > want {
		return nil, fmt.Errorf("%w: %d bytes after the signature", ErrTokenTampered, len(token)-want)
	}
	return token[tokenHeader : tokenHeader+int(n)], nil
}

// Peek decodes the snapshot of a token without verifying its signature,
// for a holder without the key — a remote client reading the token its
// server sealed (where the session is, its next chunk, its log) — and
// returns it with Token set to a copy of token. Nothing in it is
// trusted: the server that restores it opens the token with its key
// (Open). Peek refuses what Open refuses before the signature (the
// format, truncation, size) and a payload that does not decode, with the
// same errors.
func Peek(token []byte) (Snapshot, error) {
	payload, err := framed(token)
	if err != nil {
		return Snapshot{}, err
	}
	var snap Snapshot
	if err := snap.UnmarshalBinary(payload); err != nil {
		return Snapshot{}, err
	}
	snap.Token = slices.Clone(token)
	return snap, nil
}

// MaxTokenBytes bounds a sealed token: the largest payload
// (MaxSnapshotBytes) with its header and signature.
const MaxTokenBytes = tokenHeader + MaxSnapshotBytes + sha256.Size
