package docsnippets

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	testName = regexp.MustCompile("`((?:Test|Fuzz|Example)[A-Za-z0-9_]*)`")
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Example)[A-Za-z0-9_]*)\(`)
)

// testFuncs returns the names of the test, fuzz and example functions of
// the module's _test.go files.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// differenceRows returns the rows of docs/differences.md that must name
// tests: each table row's topic and test cell, and each item of "Noticed,
// not changed" with its whole text.
func differenceRows(t *testing.T, data string) (topics, cells []string) {
	t.Helper()
	lines := strings.Split(data, "\n")
	inNoticed := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "## "):
			inNoticed = strings.HasPrefix(l, "## Noticed")
		case strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| topic") && !strings.HasPrefix(l, "| ---"):
			cols := strings.Split(strings.Trim(l, "| "), " | ")
			topics = append(topics, cols[0])
			cells = append(cells, cols[len(cols)-1])
		case inNoticed && strings.HasPrefix(l, "- "):
			item := l
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") {
				i++
				item += " " + strings.TrimSpace(lines[i])
			}
			topics = append(topics, strings.SplitN(item, ".", 2)[0])
			cells = append(cells, item)
		}
	}
	return topics, cells
}

// TestDifferencesNameTests keeps docs/differences.md honest: every row of
// its table names, in its test column, only tests (no "the package's
// tests"), at least one, and every item of "Noticed, not changed" names at
// least one; and each named test exists in the module.
func TestDifferencesNameTests(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "docs", "differences.md"))
	if err != nil {
		t.Fatal(err)
	}
	have := testFuncs(t)
	topics, cells := differenceRows(t, string(data))
	if len(cells) < 30 {
		t.Fatalf("read %d rows and items; the page has more", len(cells))
	}
	for i, cell := range cells {
		names := testName.FindAllStringSubmatch(cell, -1)
		if len(names) == 0 {
			t.Errorf("%s: names no test", topics[i])
			continue
		}
		for _, n := range names {
			if !have[n[1]] {
				t.Errorf("%s: names %s, which no _test.go file defines", topics[i], n[1])
			}
		}
		if !strings.HasPrefix(strings.TrimSpace(cell), "- ") {
			if rest := strings.Trim(testName.ReplaceAllString(cell, ""), ", "); rest != "" {
				t.Errorf("%s: the test column says %q besides test names", topics[i], rest)
			}
		}
	}
}

// TestDifferenceRowsParse checks the reader on a page of its own.
func TestDifferenceRowsParse(t *testing.T) {
	t.Parallel()
	page := "# D\n\n| topic | wfgen | test |\n| --- | --- | --- |\n" +
		"| a | x | `TestA`, `TestB` |\n| b | y | the package's tests |\n\n" +
		"## Noticed, not changed\n\n- **One.** Text\n  more. Test: `TestC`.\n- **Two.** None.\n"
	topics, cells := differenceRows(t, page)
	if len(cells) != 4 || topics[0] != "a" || cells[1] != "the package's tests" ||
		cells[2] != "- **One.** Text more. Test: `TestC`." || topics[3] != "- **Two" {
		t.Fatalf("topics %q cells %q", topics, cells)
	}
	if n := testName.FindAllString(cells[0], -1); len(n) != 2 {
		t.Errorf("names in %q: %v", cells[0], n)
	}
	if n := testName.FindAllString(cells[1]+cells[3], -1); len(n) != 0 {
		t.Errorf("names found where there are none: %v", n)
	}
}
