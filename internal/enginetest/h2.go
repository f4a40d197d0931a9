package enginetest

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/mem"
)

// H2Client is a raw HTTP/2 connection to a gRPC server, for what no gRPC
// client sends: part of a message, and then nothing. Its reader keeps the
// frames the server sends, and answers its settings and pings.
type H2Client struct {
	t    testing.TB
	conn net.Conn
	mu   sync.Mutex // writes
	fr   *http2.Framer
	next uint32 // the next stream id

	fmu     sync.Mutex
	windows map[uint32]uint32 // window the server opened per stream (WINDOW_UPDATE)
	status  map[uint32]string // grpc-status the server answered per stream
	message map[uint32]string // grpc-message
	resets  map[uint32]http2.ErrCode
	changed chan struct{} // closed and replaced at each frame
}

// DialH2 opens an HTTP/2 connection (h2c, prior knowledge) to addr.
func DialH2(t testing.TB, addr string) *H2Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &H2Client{t: t, conn: conn, fr: http2.NewFramer(conn, conn), next: 1,
		windows: map[uint32]uint32{}, status: map[uint32]string{}, message: map[uint32]string{},
		resets: map[uint32]http2.ErrCode{}, changed: make(chan struct{})}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *H2Client) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		c.fmu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.fr.WriteSettingsAck()
				c.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.fr.WritePing(true, f.Data)
				c.mu.Unlock()
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 {
				c.windows[f.StreamID] += f.Increment
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				switch hf.Name {
				case "grpc-status":
					c.status[f.StreamID] = hf.Value
				case "grpc-message":
					c.message[f.StreamID] = hf.Value
				}
			}
		case *http2.RSTStreamFrame:
			c.resets[f.StreamID] = f.ErrCode
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.fmu.Unlock()
	}
}

// Open starts a call of method with the metadata md (name, value pairs)
// and returns its stream id.
func (c *H2Client) Open(method string, md ...string) uint32 {
	c.t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "wfserve"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(md); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: md[i], Value: md[i+1]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// Send writes data on stream id in frames of at most 16 KiB, as far as the
// flow-control window the test leaves unchecked allows the server to take.
func (c *H2Client) Send(id uint32, data []byte) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(data) > 0 {
		n := min(len(data), 16<<10)
		if err := c.fr.WriteData(id, false, data[:n]); err != nil {
			c.t.Fatal(err)
		}
		data = data[n:]
	}
}

// GRPCPrefix is the 5-byte gRPC message prefix of a message of n bytes.
func GRPCPrefix(n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(n))
}

// WaitStatus waits until stream id is answered and returns its grpc-status
// and grpc-message.
func (c *H2Client) WaitStatus(id uint32) (string, string) {
	c.t.Helper()
	deadline := time.After(Patience)
	for {
		c.fmu.Lock()
		st, msg, ch := c.status[id], c.message[id], c.changed
		c.fmu.Unlock()
		if st != "" {
			return st, msg
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("stream %d: no answer after %v", id, Patience)
		}
	}
}

// Window is what the server opened of stream id's window so far.
func (c *H2Client) Window(id uint32) uint32 {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.windows[id]
}

// RawCodec is a gRPC codec that sends a message's bytes as they are
// (*[]byte): what a client that sends malformed or hostile protobuf sends.
type RawCodec struct{}

// Name is the proto codec's, so that servers take the messages as theirs.
func (RawCodec) Name() string { return "proto" }

// Marshal sends the bytes v (*[]byte) holds.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

// Unmarshal keeps the bytes received in v (*[]byte).
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
