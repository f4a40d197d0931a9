package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func writeFile(t testing.TB, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log.txt")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		data     string
		maxBytes int64
		maxLines int
		want     string
	}{
		{"empty", "", 100, 10, ""},
		{"whole small file", "a\nb\nc\n", 100, 10, "a\nb\nc"},
		{"no trailing newline", "a\nb\nc", 100, 10, "a\nb\nc"},
		{"last lines", "1\n2\n3\n4\n5\n", 100, 2, "4\n5"},
		{"one line", "1\n2\n3\n", 100, 1, "3"},
		{"mid-file seek drops partial line", "first line\nsecond\nthird\n", 10, 10, "third"},
		{"seek lands on a line start", "aaaa\nbbbb\n", 5, 10, "bbbb"},
		{"seek right after a newline", "aaaa\nbbbb\n", 6, 10, "bbbb"},
		{"crlf", "a\r\nb\r\n", 100, 10, "a\nb"},
		{"blank lines kept", "a\n\n\nb\n", 100, 10, "a\n\n\nb"},
		{"window without newline keeps the fragment", "xxxxxxxxxxxxxxxxxxxx", 5, 3, "xxxxx"},
		{"torn rune at window start", "é" + strings.Repeat("é", 3), 5, 3, "éé"},
		{"torn rune at the end is dropped", "ok\nbad\xe2\x82", 100, 10, "ok\nbad"},
		{"invalid bytes replaced", "a\xffb\n", 100, 10, "a\uFFFDb"},
		{"multi-byte lines", "αβγ\nδεζ\nηθι\n", 9, 10, "ηθι"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Tail(writeFile(t, c.data), c.maxBytes, c.maxLines)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Tail = %q; want %q", got, c.want)
			}
		})
	}
}

func TestTailMissingAndBadInput(t *testing.T) {
	t.Parallel()
	if got, err := Tail(filepath.Join(t.TempDir(), "missing.log"), 10, 10); got != "" || err != nil {
		t.Errorf("missing file: %q, %v", got, err)
	}
	if _, err := Tail(t.TempDir(), 10, 10); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	p := writeFile(t, "x\n")
	for _, c := range [][2]int64{{0, 1}, {-1, 1}, {1, 0}, {1, -3}} {
		if _, err := Tail(p, c[0], int(c[1])); err == nil {
			t.Errorf("Tail(maxBytes=%d, maxLines=%d) accepted", c[0], c[1])
		}
	}
}

// sparseFile makes a file of size bytes that is all holes except tail at
// the end.
func sparseFile(t testing.TB, size int64, tail string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sparse.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size - int64(len(tail))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(tail), size-int64(len(tail))); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTailSparseMultiGiB reads the tail of an 8 GiB sparse file whose end is
// cut in the middle of a multi-byte character and whose window starts in the
// middle of one. (Time independent of size is shown by BenchmarkTail.)
func TestTailSparseMultiGiB(t *testing.T) {
	t.Parallel()
	// "€" is e2 82 ac; the file ends after e2 82.
	body := "€€€ window starts inside this line\nline two ✓\nline three €\nlast €\xe2\x82"
	p := sparseFile(t, 8<<30, body)
	st, _ := os.Stat(p)
	if st.Size() != 8<<30 {
		t.Fatalf("size %d", st.Size())
	}
	for _, maxBytes := range []int64{int64(len(body)) - 1, int64(len(body)) - 4, 40, 1 << 20} {
		got, err := Tail(p, maxBytes, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("maxBytes=%d: invalid UTF-8 %q", maxBytes, got)
		}
		if !strings.HasSuffix(got, "line three €\nlast €") {
			t.Errorf("maxBytes=%d: Tail = %q", maxBytes, got)
		}
		if maxBytes < int64(len(body)) && strings.Contains(got, "window starts") {
			t.Errorf("maxBytes=%d: partial first line kept: %q", maxBytes, got)
		}
	}
	got, err := Tail(p, 1<<20, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The 1 MiB window starts in the holes: NUL bytes and "€€€ window..."
	// are one partial line, dropped; the torn "€" at the end is dropped.
	if got != "line two ✓\nline three €\nlast €" {
		t.Errorf("Tail = %q", got)
	}
}

func BenchmarkTail(b *testing.B) {
	body := strings.Repeat("a log line of moderate length, with a ✓ in it\n", 4096)
	for _, size := range []int64{1 << 20, 1 << 30, 64 << 30} {
		b.Run(fmt.Sprintf("file=%dMiB", size>>20), func(b *testing.B) {
			p := sparseFile(b, size, body)
			b.ReportAllocs()
			for b.Loop() {
				s, err := Tail(p, 64<<10, 200)
				if err != nil || s == "" {
					b.Fatal(s, err)
				}
			}
		})
	}
}
