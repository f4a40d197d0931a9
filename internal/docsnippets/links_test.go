package docsnippets

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkPages are the Markdown files whose relative links must resolve: the
// pages, and the changelog.
func linkPages(t *testing.T) []string {
	return append(pages(t), filepath.Join(root, "CHANGELOG.md"))
}

// link is one relative link of a page.
type link struct {
	line   int
	target string // the path part, "" for an anchor of the page itself
	anchor string // without '#'
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// scan returns a page's relative links and the anchors its headings (and
// <a name|id="..."> tags) define, leaving out fenced code blocks and code
// spans.
func scan(data []byte) (links []link, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trim := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trim, fence) && strings.Trim(trim, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(l); m != nil {
			s := slug(m[2])
			if k := seen[s]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				anchors[s] = true
			}
			seen[s]++
		}
		text := codeSpan.ReplaceAllString(l, "")
		var dests []string
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			dests = append(dests, m[1])
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			dests = append(dests, m[1])
		}
		for _, d := range dests {
			if d == "" || strings.Contains(d, "://") || strings.HasPrefix(d, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(d, "#")
			links = append(links, link{line: n, target: target, anchor: anchor})
		}
	}
	return links, anchors
}

// slug is the anchor GitHub gives a heading: its text as rendered (code
// spans, links and emphasis reduced to their text), lower-cased, with
// everything but letters, marks, digits, '_', '-' and spaces dropped and
// spaces made '-'.
func slug(h string) string {
	h = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	h = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(h, "")
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinksResolve checks every relative link of the README, the changelog
// and the docs: the file or folder exists, and an anchor into a Markdown
// page names one of its headings.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		_, a := scan(data)
		anchorsOf[path] = a
		return a, nil
	}
	checked := 0
	for _, page := range linkPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		links, _ := scan(data)
		name, _ := filepath.Rel(root, page)
		for _, l := range links {
			checked++
			path := page
			if l.target != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(l.target))
				st, err := os.Stat(path)
				if err != nil {
					t.Errorf("%s:%d: link to %s: no such file", name, l.line, l.target)
					continue
				}
				if st.IsDir() || !strings.HasSuffix(path, ".md") {
					continue // an anchor into code or a folder is GitHub's (#L12)
				}
			}
			if l.anchor == "" {
				continue
			}
			a, err := anchors(path)
			if err != nil {
				t.Fatal(err)
			}
			if !a[l.anchor] {
				t.Errorf("%s:%d: link to %s#%s: the page has no heading with that anchor", name, l.line, l.target, l.anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d links; the docs have more", checked)
	}
}

// TestLinkScan checks the scanner on a page with every case it handles,
// so that a link checker that finds nothing cannot pass unnoticed.
func TestLinkScan(t *testing.T) {
	t.Parallel()
	page := "# Title\n\n" +
		"## The `runtime/spec` package (types)\n\n" +
		"## Title\n\n" +
		"<a name=\"custom\"></a>\n" +
		"See [a](other.md#x-y), [b](#the-runtimespec-package-types \"t\"), ![c](img.png) and [d](https://example.com/x.md).\n" +
		"Not `[e](code.md)`.\n\n" +
		"```md\n[f](fenced.md)\n```\n\n" +
		"[ref]: ../up/ref.md#z\n"
	links, anchors := scan([]byte(page))
	want := []link{{8, "other.md", "x-y"}, {8, "", "the-runtimespec-package-types"}, {8, "img.png", ""}, {15, "../up/ref.md", "z"}}
	if fmt.Sprint(links) != fmt.Sprint(want) {
		t.Errorf("links %v, want %v", links, want)
	}
	for _, a := range []string{"title", "title-1", "the-runtimespec-package-types", "custom"} {
		if !anchors[a] {
			t.Errorf("no anchor %q in %v", a, anchors)
		}
	}
	for h, want := range map[string]string{
		"Differences from the Python runtime": "differences-from-the-python-runtime",
		"`WORLDFOUNDRY_LOG_LEVEL` in both":    "worldfoundry_log_level-in-both",
		"Lanes: forward calls at once":        "lanes-forward-calls-at-once",
		"wfgen.yaml":                          "wfgenyaml",
		"Batch-invariant mode":                "batch-invariant-mode",
		"Größe — [link](x.md) **bold**":       "größe--link-bold",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// docPath is a repository path of a docs page as code, comments and
// scripts mention it (docs/engine.md, docs/benchmarks/README.md).
var docPath = regexp.MustCompile(`(?:^|[^\w/.-])(docs/[\w./-]*\w\.md)`)

// TestDocPathsExist checks that every docs page that a tracked file names
// by its repository path (a code comment's "see docs/batching.md", a
// Makefile's help) exists, so that moving a page cannot leave one behind.
// A path into a folder this repository does not have is another
// project's and is left alone.
func TestDocPathsExist(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	found := 0
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		switch ext := filepath.Ext(f); {
		case ext == ".go" || ext == ".md" || ext == ".sh" || ext == ".yaml" || ext == ".py" || f == "Makefile":
		default:
			continue
		}
		if strings.HasPrefix(f, "golden/") || strings.HasPrefix(f, "generated/") {
			continue // generated docs name pages of the reader's repository
		}
		if f == "CHANGELOG.md" {
			continue // names the pages that moved, where they were
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		for i, l := range strings.Split(string(data), "\n") {
			for _, m := range docPath.FindAllStringSubmatch(l, -1) {
				if _, err := os.Stat(filepath.Join(root, filepath.Dir(m[1]))); err != nil {
					continue // another project's page (Triton's docs/protocol/...)
				}
				found++
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
					t.Errorf("%s:%d: names %s, which does not exist", f, i+1, m[1])
				}
			}
		}
	}
	if found < 20 {
		t.Errorf("found %d mentions of docs pages; the repository has more", found)
	}
}
