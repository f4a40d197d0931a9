package manifest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf16"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// Problems that once came out at 1:1 (or not at all) are reported where
// they are, by both loaders.
func TestLocatedMessages(t *testing.T) {
	t.Run("integer beyond 2^64 yaml", func(t *testing.T) {
		// yaml.v3 reads an integer too large for 64 bits as a float; a
		// manifest never means that.
		src := "a: 1\nb: {n: 123456789012345678901234567890}\nc:\n  - -99999999999999999999\n  - 0x1FFFFFFFFFFFFFFFF\n"
		_, errs := parseErrors(t, "big.yaml", []byte(src))
		wantError(t, errs, 2, 8, "integer 123456789012345678901234567890 is out of range (64-bit signed)")
		wantError(t, errs, 4, 5, "integer -99999999999999999999 is out of range")
		wantError(t, errs, 5, 5, "integer 0x1FFFFFFFFFFFFFFFF is out of range")
		if len(errs) != 3 {
			t.Errorf("want 3 errors, got %v", errs)
		}
		// Quoted, it is a string; written as a float, a float.
		f := mustParse(t, "ok.yaml", "a: \"123456789012345678901234567890\"\nb: 1.0e30\n")
		if v := f.Value.(map[string]any); v["a"] != "123456789012345678901234567890" {
			t.Errorf("quoted big number = %#v", v["a"])
		}
	})
	t.Run("integer beyond 2^64 json", func(t *testing.T) {
		src := "{\n  \"a\": 1,\n  \"b\": {\"n\": 123456789012345678901234567890}\n}"
		_, errs := parseErrors(t, "big.json", []byte(src))
		wantError(t, errs, 3, 14, "integer 123456789012345678901234567890 is out of range (64-bit signed)")
	})
	for _, c := range []struct {
		name, char, want string
	}{
		{"DEL", "\x7f", `character U+007F (DEL) is not allowed in YAML; in a double-quoted string write it as "\x7f"`},
		{"U+FFFF", "\uffff", `character U+FFFF is not allowed in YAML; in a double-quoted string write it as "\uffff"`},
		{"C1", "\u0086", `character U+0086 is not allowed in YAML`},
	} {
		t.Run(c.name+" yaml", func(t *testing.T) {
			src := "a: 1\nb: \"x" + c.char + "y\"\n"
			_, errs := parseErrors(t, "ctl.yaml", []byte(src))
			wantError(t, errs, 2, 6, "invalid YAML: "+c.want)
			// In a comment too (YAML forbids it everywhere).
			_, errs = parseErrors(t, "ctl.yaml", []byte("a: 1\n\n# é"+c.char+"\n"))
			wantError(t, errs, 3, 4, "invalid YAML: character U+")
		})
		t.Run(c.name+" json", func(t *testing.T) {
			// JSON allows the character in a string: the value keeps it.
			f := mustParse(t, "ctl.json", "{\n \"b\": \"x"+c.char+"y\"}")
			if v := f.Value.(map[string]any)["b"]; v != "x"+c.char+"y" {
				t.Errorf("value = %q", v)
			}
			if l, col := f.Position("/b"); l != 2 || col != 7 {
				t.Errorf("Position = %d:%d, want 2:7", l, col)
			}
		})
	}
}

// UTF-16 manifests are named as such, with the command that converts them.
func TestUTF16(t *testing.T) {
	enc := func(s string, bigEndian, bom bool) []byte {
		units := utf16.Encode([]rune(s))
		if bom {
			units = append([]uint16{0xfeff}, units...)
		}
		var b []byte
		for _, u := range units {
			if bigEndian {
				b = append(b, byte(u>>8), byte(u))
			} else {
				b = append(b, byte(u), byte(u>>8))
			}
		}
		return b
	}
	const src = "schema_version: 1\nmodel_family_id: x\n"
	for _, c := range []struct {
		name     string
		big, bom bool
		want     string
	}{
		{"LE BOM", false, true, "file is UTF-16 (little-endian, with a byte order mark); a manifest is UTF-8 text: convert it with iconv -f UTF-16 -t UTF-8"},
		{"BE BOM", true, true, "file is UTF-16 (big-endian, with a byte order mark); a manifest is UTF-8 text: convert it with iconv -f UTF-16 -t UTF-8"},
		{"LE", false, false, "file is UTF-16 (little-endian); a manifest is UTF-8 text: convert it with iconv -f UTF-16LE -t UTF-8"},
		{"BE", true, false, "file is UTF-16 (big-endian); a manifest is UTF-8 text: convert it with iconv -f UTF-16BE -t UTF-8"},
	} {
		for _, path := range []string{"m.yaml", "m.json"} {
			data := enc(src, c.big, c.bom)
			if strings.HasSuffix(path, ".json") {
				data = enc(`{"schema_version": 1}`, c.big, c.bom)
			}
			_, errs := parseErrors(t, path, data)
			wantError(t, errs, 1, 1, c.want)
			for _, e := range errs {
				if strings.Contains(e.Message, "binary") {
					t.Errorf("%s %s: called binary: %v", c.name, path, e)
				}
			}
		}
	}
	// The advice works: iconv turns the file into one that parses.
	if _, err := exec.LookPath("iconv"); err == nil {
		dir := t.TempDir()
		p := filepath.Join(dir, "m.yaml")
		if err := os.WriteFile(p, enc(src, false, true), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("iconv", "-f", "UTF-16", "-t", "UTF-8", p).Output()
		if err != nil {
			t.Fatal(err)
		}
		mustParse(t, "m.yaml", string(out))
	}
}

// ReadFile never blocks on a named pipe (or a symbolic link to one) and
// refuses anything that is not a regular file.
func TestReadFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, "/dev/null"} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(p); done <- err }()
		// A blocked open never returns: only that reaches the bound.
		if err := enginetest.Receive(t, "ReadFile("+p+") (blocked?)", done); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ReadFile(%s) = %v, want a not-a-regular-file error", p, err)
		}
	}
}
