package oippb

import (
	"reflect"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// Unmarshal decodes a request message (a ModelInferRequest or a
// ModelStreamInferRequest) from its wire bytes b after measuring them
// without allocating: a request with more inputs, raw contents or asked
// outputs than lim.MaxInputs is refused before decoding, and what decoding
// takes beyond b itself — each message, map entry and repeated element
// becomes a Go value of its own, so that 8 MB of empty inputs entries
// become hundreds of MB — is passed to lim.Reserve first. Malformed bytes
// are an error matching oip.ErrBadRequest.
func Unmarshal(b []byte, m proto.Message, lim oip.Limits) error {
	var w measurer
	top := m.ProtoReflect().Descriptor()
	if !w.message(b, top, 0) {
		return bad("malformed protobuf message: %s", w.why)
	}
	if w.inputs > 0 || w.outputs > 0 {
		if err := lim.CheckCounts(w.inputs, w.outputs); err != nil {
			return err
		}
	}
	if lim.Reserve != nil {
		if err := lim.Reserve(w.cost); err != nil {
			return err
		}
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return bad("malformed protobuf message: %v", err)
	}
	return nil
}

// measurer walks a message's wire bytes by its descriptor.
type measurer struct {
	cost            int64 // bytes decoding allocates beyond the wire bytes
	inputs, outputs int   // ModelInferRequest's inputs (or raw contents) and outputs
	why             string
}

// maxNesting bounds how deep messages nest (the protocol's nest three
// levels; protobuf-go's own limit is 10,000).
const maxNesting = 32

// elemSlot bounds what one element of a repeated field of messages,
// strings or bytes takes in its slice, all the slice's growth counted (a
// header of up to 24 bytes, in slices that double as they grow: measured,
// 130 bytes for each of 200,000 empty bytes elements).
const elemSlot = 160

// packedSlack is what a packed repeated field's slice of n wire bytes
// takes beyond 8 bytes an element: its allocation rounded up to the
// allocator's size class (at most an eighth more) or to whole pages.
func packedSlack(n int) int64 { return int64(n) + 64 }

// mapEntryCost is what one map entry takes in a Go map, its hash table's
// growth included.
const mapEntryCost = 128

// message walks the fields of one message of descriptor d in b.
func (w *measurer) message(b []byte, d protoreflect.MessageDescriptor, depth int) bool {
	if depth > maxNesting {
		w.why = "messages nested too deep"
		return false
	}
	w.cost += structSize(d)
	fields := d.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			w.why = protowire.ParseError(n).Error()
			return false
		}
		b = b[n:]
		f := fields.ByNumber(num)
		if f == nil || typ != protowire.BytesType {
			// Unknown fields are kept as bytes; scalars cost nothing beyond
			// their place in the struct, or 8 bytes in a slice (twice, for
			// its growth) when repeated and not packed.
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				w.why = protowire.ParseError(n).Error()
				return false
			}
			switch {
			case f == nil:
				w.cost += int64(n) // kept as unknown bytes: a copy
			case f.IsList():
				w.cost += 2 * 8
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			w.why = protowire.ParseError(n).Error()
			return false
		}
		b = b[n:]
		if d.FullName() == modelInferRequestName {
			switch num {
			case 5: // inputs
				w.inputs++
			case 6: // outputs
				w.outputs++
			}
		}
		switch {
		case f.IsMap():
			w.cost += mapEntryCost
			if !w.message(v, f.Message(), depth+1) {
				return false
			}
		case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
			if f.IsList() {
				w.cost += elemSlot
			}
			if !w.message(v, f.Message(), depth+1) {
				return false
			}
		case f.Kind() == protoreflect.StringKind || f.Kind() == protoreflect.BytesKind:
			if f.IsList() {
				w.cost += elemSlot
			}
			w.cost += int64(len(v)) // the copy decoding makes
		default: // a packed repeated scalar: at most 8 bytes per wire byte
			w.cost += 8*int64(len(v)) + packedSlack(len(v))
		}
	}
	return true
}

// modelInferRequestName is the message whose inputs and outputs are
// counted (a ModelStreamInferRequest's start is one).
const modelInferRequestName protoreflect.FullName = "inference.ModelInferRequest"

var structSizes sync.Map // protoreflect.FullName → int64

// structSize is the size of the Go struct of message d, twice over (the
// struct, and the slack of its allocation class and of what points to it).
func structSize(d protoreflect.MessageDescriptor) int64 {
	if v, ok := structSizes.Load(d.FullName()); ok {
		return v.(int64)
	}
	size := int64(256)
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		size = 2 * int64(reflect.TypeOf(mt.Zero().Interface()).Elem().Size())
	}
	structSizes.Store(d.FullName(), size)
	return size
}
