package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
)

// listening is what -addr-file holds: the addresses wfserve listens on,
// with the ports the kernel picked for port 0.
type listening struct {
	Addr     string `json:"addr"`
	GRPCAddr string `json:"grpc_addr,omitempty"`
}

// writeAddrFile writes the listeners' addresses to path as one JSON line,
// through a temporary file renamed over path, so that a reader that polls
// for the file sees the whole of it or nothing.
func writeAddrFile(path string, ln, gln net.Listener) error {
	l := listening{Addr: ln.Addr().String()}
	if gln != nil {
		l.GRPCAddr = gln.Addr().String()
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
