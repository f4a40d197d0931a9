package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTail checks Tail on arbitrary file contents and bounds: valid UTF-8,
// at most maxLines lines, never more than the window, and for valid UTF-8
// input the result is the end of the file.
func FuzzTail(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), int64(3), 2)
	f.Add([]byte("€€€\n€\xe2\x82"), int64(4), 5)
	f.Add([]byte("no newline at all"), int64(5), 1)
	f.Add([]byte("x\r\ny\r\n"), int64(100), 10)
	f.Add([]byte("\xff\xfe\n\x80abc"), int64(2), 1)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, maxBytes int64, maxLines int) {
		p := filepath.Join(dir, "fuzz.log")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Tail(p, maxBytes, maxLines)
		if maxBytes <= 0 || maxLines <= 0 {
			if err == nil {
				t.Fatal("non-positive bound accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8: %q", got)
		}
		if n := strings.Count(got, "\n") + 1; got != "" && n > maxLines {
			t.Fatalf("%d lines > maxLines %d", n, maxLines)
		}
		// Each invalid byte may become a 3-byte U+FFFD.
		if int64(len(got)) > 3*maxBytes {
			t.Fatalf("result of %d bytes from a %d-byte window", len(got), maxBytes)
		}
		if utf8.Valid(data) && !bytes.Contains(data, []byte("\r")) {
			end := strings.TrimSuffix(string(data), "\n")
			if !strings.HasSuffix(end, got) {
				t.Fatalf("Tail %q is not the end of the file %q", got, data)
			}
			if int64(len(data)) <= maxBytes && strings.Count(end, "\n") < maxLines && got != end {
				t.Fatalf("whole file fits: Tail = %q; want %q", got, end)
			}
		}
	})
}

// FuzzCUDAVisibleDevices checks the device parser never panics and that a
// value it returns is one the inherited list (or the index) allows.
func FuzzCUDAVisibleDevices(f *testing.F) {
	f.Add("cuda:1", "4,5,6", true, false)
	f.Add("cuda:0", "", true, false)
	f.Add("cpu", "0", false, false)
	f.Add("cuda:2", "GPU-a,GPU-b", true, true)
	f.Add("cuda:00", "x", true, false)
	f.Add("npu:3", "", false, false)
	f.Add("Cuda", "3,1", true, false)
	f.Fuzz(func(t *testing.T, device, inherited string, set, noMap bool) {
		opt := CUDAOptions{NoMap: noMap}
		if set {
			opt.Inherited = &inherited
		}
		v, ok, err := cudaVisible(device, opt)
		if err != nil {
			if ok || v != "" || err.Error() == "" {
				t.Fatalf("error with a value: %q %v %v", v, ok, err)
			}
			return
		}
		if !ok {
			if v != "" {
				t.Fatalf("no value expected, got %q", v)
			}
			return
		}
		_, idx, hasIdx := strings.Cut(strings.TrimSpace(device), ":")
		if !hasIdx { // bare cuda: the inherited list as is, else default_cuda
			if set && v != inherited || !set && v != DefaultCUDA {
				t.Fatalf("bare %q gave %q (inherited %q, set %v)", device, v, inherited, set)
			}
			return
		}
		n, perr := strconv.Atoi(idx)
		if perr != nil || n < 0 {
			t.Fatalf("accepted index %q", idx)
		}
		if noMap || !set {
			if v != strconv.Itoa(n) {
				t.Fatalf("unmapped value %q for index %d", v, n)
			}
			return
		}
		list := strings.Split(inherited, ",")
		if n >= len(list) || strings.TrimSpace(list[n]) != v || v == "" {
			t.Fatalf("mapped value %q is not entry %d of %q", v, n, inherited)
		}
	})
}
