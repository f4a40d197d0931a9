package importer

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSkeleton builds and validates the skeleton of three methods
// with 16 arguments in all (the schemas of TestSkeleton).
func BenchmarkSkeleton(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Skeleton(checkpoint, schemas, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspect hashes a 64 MiB checkpoint and scans its code for
// return keys: the cost Import adds to loading the module.
func BenchmarkInspect(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.pt")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{"big/data.pkl", []byte(pkl)}, {"big/code/__torch__/pkg.py", []byte(netCode)}, {"big/data/0", bytes.Repeat([]byte{1}, 64<<20)}} {
		// Stored, like torch.jit.save stores tensor data.
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Store})
		if err != nil {
			b.Fatal(err)
		}
		w.Write(e.data)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		ck, err := Inspect(path)
		if err != nil || len(ck.ReturnKeys["step"]) != 2 {
			b.Fatal(err, ck.ReturnKeys)
		}
	}
}
