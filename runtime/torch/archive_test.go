package torch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeZip writes entries (name → content) as a zip, stored or deflated.
func writeZip(t *testing.T, entries [][2]string, method uint16) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		f, err := w.CreateHeader(&zip.FileHeader{Name: e[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(e[1]))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.pt")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var archiveEntries = [][2]string{
	{"m/data.pkl", "\x80\x02pickle."}, {"m/code/__torch__.py", "class M: pass\n"},
	{"m/data/0", "\x00\x00\x80\x3f"}, {"m/version", "3\n"},
}

func TestCheckArchiveAccepts(t *testing.T) {
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		if err := checkArchive(writeZip(t, archiveEntries, method)); err != nil {
			t.Errorf("method %d: %v", method, err)
		}
	}
}

// patch flips the first occurrence of old in the file at path to new.
func patch(t *testing.T, path string, old, new []byte) {
	t.Helper()
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, old)
	if i < 0 {
		t.Fatalf("%q not found", old)
	}
	copy(b[i:], new)
	os.WriteFile(path, b, 0o644)
}

func TestCheckArchiveRejects(t *testing.T) {
	notZip := filepath.Join(t.TempDir(), "x.pt")
	os.WriteFile(notZip, []byte("PK\x03\x04 but not really"), 0o644)
	noData := writeZip(t, [][2]string{{"m/version", "3\n"}}, zip.Store)
	badCRC := writeZip(t, archiveEntries, zip.Store)
	patch(t, badCRC, []byte("class M"), []byte("class N"))
	// A corrupt tensor record is not read (only its sizes are checked).
	badTensor := writeZip(t, archiveEntries, zip.Store)
	patch(t, badTensor, []byte("\x00\x00\x80\x3f"), []byte("\x00\x00\x80\x40"))
	if err := checkArchive(badTensor); err != nil {
		t.Errorf("tensor record content is checked: %v", err)
	}
	// Claim a huge uncompressed size for a stored entry in the central
	// directory (offset 24 of a central header).
	huge := writeZip(t, archiveEntries, zip.Store)
	b, _ := os.ReadFile(huge)
	cd := bytes.Index(b, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(b[cd+24:], 0xfffffff0)
	os.WriteFile(huge, b, 0o644)

	cases := map[string][2]string{
		"not zip":      {notZip, "not a TorchScript archive"},
		"no data.pkl":  {noData, "no data.pkl record"},
		"bad checksum": {badCRC, "checksum error"},
		"huge size":    {huge, "sizes"},
	}
	for name, c := range cases {
		err := checkArchive(c[0])
		if err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: error = %v, want %q", name, err, c[1])
		}
	}
}

func TestIsTensorRecord(t *testing.T) {
	for name, want := range map[string]bool{
		"m/data/0": true, "archive/constants/3": true, "m/data.pkl": false, "m/code/x.py": false, "data/0": false,
	} {
		if got := isTensorRecord(name); got != want {
			t.Errorf("isTensorRecord(%q) = %v", name, got)
		}
	}
}
