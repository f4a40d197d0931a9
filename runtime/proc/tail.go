package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"
)

// Tail returns the last lines of a possibly huge log file as valid UTF-8,
// reading at most maxBytes (plus one byte) whatever the file's size: it
// seeks to max(size-maxBytes, 0), drops the first partial line after a
// mid-file seek (so the result never starts inside a line or a UTF-8
// sequence), and keeps the last maxLines lines.
//
// Lines are joined with "\n" and the result has no trailing newline; a
// "\r\n" ending counts as "\n". When the window holds no newline at all, the
// whole window is one partial line: it is kept, minus any torn UTF-8 bytes at
// its start. An incomplete UTF-8 sequence at the very end (a writer caught
// mid-character) is dropped, and any other invalid byte sequence becomes
// U+FFFD. A missing file gives "" and no error. maxBytes and maxLines must be
// positive; a directory or other non-regular file is an error.
func Tail(path string, maxBytes int64, maxLines int) (string, error) {
	if maxBytes <= 0 || maxLines <= 0 {
		return "", fmt.Errorf("proc: Tail(%q): maxBytes (%d) and maxLines (%d) must be positive", path, maxBytes, maxLines)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("proc: tail: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("proc: tail: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("proc: tail %s: not a regular file (%s)", path, st.Mode().Type())
	}
	size := st.Size()
	start := max(size-maxBytes, 0)
	from := start
	if start > 0 {
		from = start - 1 // one byte of look-behind: is start at a line start?
	}
	buf := make([]byte, size-from)
	n, err := f.ReadAt(buf, from)
	if err != nil && err != io.EOF { // EOF: the file shrank since Stat
		return "", fmt.Errorf("proc: tail: %w", err)
	}
	buf = buf[:n]
	atLineStart := true
	if start > 0 && len(buf) > 0 {
		atLineStart = buf[0] == '\n'
		buf = buf[1:]
	}
	return tailText(buf, atLineStart, maxLines), nil
}

// tailText turns a window of raw log bytes into the tail Tail returns.
// atLineStart says whether b begins at the start of a line.
func tailText(b []byte, atLineStart bool, maxLines int) string {
	if !atLineStart {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			for k := 0; k < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); k++ {
				b = b[1:]
			}
		}
	}
	// Drop an incomplete sequence at the end: the writer is mid-character.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	pos := len(b)
	for range maxLines {
		j := bytes.LastIndexByte(b[:pos], '\n')
		if j < 0 {
			pos = -1
			break
		}
		pos = j
	}
	if pos >= 0 {
		b = b[pos+1:]
	}
	s := string(b)
	if strings.Contains(s, "\r\n") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
