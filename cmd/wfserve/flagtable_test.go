package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/serving.md's flag table from the flag set")

// The flag table of docs/serving.md is made from wfserve's own flag set —
// every flag, its default, its usage — so that it cannot leave a flag out
// or say other than the code (it lacked five flags, and said -max-tensor
// counted elements). go test ./cmd/wfserve -run TestFlagTable -update
// rewrites it.
func TestFlagTable(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "serving.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- flags: made from wfserve's flag set (go test ./cmd/wfserve -run TestFlagTable -update) -->\n", "<!-- /flags -->\n"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no flag table between %q and %q", path, begin, end)
	}
	want := flagTable()
	if got := doc[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's flag table is not wfserve's flags (go test ./cmd/wfserve -run TestFlagTable -update):\n%s\nwant:\n%s", path, got, want)
	}
}

// flagTable is the markdown table of wfserve's flags.
func flagTable() string {
	fs, _ := flags(io.Discard)
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	fs.VisitAll(func(f *flag.Flag) {
		_, use := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "| `-%s` | %s | %s |\n", f.Name, defaultText(f), strings.ReplaceAll(use, "|", `\|`))
	})
	return b.String()
}

// defaultText is a flag's default as the table shows it: byte sizes in
// MiB, none for an empty one.
func defaultText(f *flag.Flag) string {
	switch v := f.DefValue; {
	case v == "" || v == "0" && strings.Contains(f.Usage, "default"):
		return "—"
	case strings.Contains(f.Usage, "`bytes`"):
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 1<<20 && n%(1<<20) == 0 {
			return fmt.Sprintf("%d MiB", n>>20)
		}
		return v
	default:
		return "`" + v + "`"
	}
}
