package udiff

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lcs is the textbook O(NM) longest common subsequence length.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func randomLines(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a'+r.Intn(4))) + "\n"
	}
	return out
}

// TestDiffIsShortestAndCorrect checks on random inputs that the script
// turns a into b and has the minimal number of edits.
func TestDiffIsShortestAndCorrect(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 2000; iter++ {
		a := randomLines(r, r.Intn(20))
		b := randomLines(r, r.Intn(20))
		ops := Diff(a, b)
		var gotA, gotB []string
		edits := 0
		for _, o := range ops {
			switch o.Kind {
			case Equal:
				gotA = append(gotA, o.Line)
				gotB = append(gotB, o.Line)
			case Delete:
				gotA = append(gotA, o.Line)
				edits++
			case Insert:
				gotB = append(gotB, o.Line)
				edits++
			}
		}
		if strings.Join(gotA, "") != strings.Join(a, "") || strings.Join(gotB, "") != strings.Join(b, "") {
			t.Fatalf("script does not reproduce the inputs:\na=%q\nb=%q\nops=%v", a, b, ops)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("edits = %d, want the minimum %d\na=%q\nb=%q", edits, want, a, b)
		}
	}
}

// TestUnifiedAppliesWithPatch feeds the output to the real patch(1) and
// checks that it turns the old file into the new one.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) not installed")
	}
	r := rand.New(rand.NewSource(2))
	dir := t.TempDir()
	for iter := 0; iter < 40; iter++ {
		a := strings.Join(randomLines(r, 5+r.Intn(60)), "")
		b := strings.Join(randomLines(r, 5+r.Intn(60)), "")
		if iter%3 == 0 {
			b = strings.TrimSuffix(b, "\n")
		}
		for _, ctx := range []int{0, 1, 3} {
			d := Unified("a/f", "b/f", a, b, ctx)
			f := filepath.Join(dir, "f")
			if err := os.WriteFile(f, []byte(a), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("patch", "-s", "-u", f)
			cmd.Stdin = strings.NewReader(d)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("patch failed: %v\n%s\ndiff:\n%s", err, out, d)
			}
			got, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != b {
				t.Fatalf("patched file differs (context %d)\ndiff:\n%s", ctx, d)
			}
		}
	}
}

func TestUnifiedFormat(t *testing.T) {
	// Expected output as printed by GNU diff -u.
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"
	new := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	want := `--- old
+++ new
@@ -1,7 +1,7 @@
 a
 b
 c
-d
+D
 e
 f
 g
@@ -10,3 +10,4 @@
 j
 k
 l
+m
`
	if got := Unified("old", "new", old, new, 3); got != want {
		t.Errorf("Unified =\n%s\nwant\n%s", got, want)
	}
	if got := Unified("x", "y", old, old, 3); got != "" {
		t.Errorf("equal inputs gave %q", got)
	}
	// Creating a file: the old side is empty.
	if got := Unified("/dev/null", "f", "", "x\n", 3); got != "--- /dev/null\n+++ f\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("new-file diff = %q", got)
	}
	// A missing final newline is marked.
	if got := Unified("a", "b", "x\n", "x", 3); !strings.Contains(got, "\\ No newline at end of file") {
		t.Errorf("missing newline not marked: %q", got)
	}
}

func TestDiffBeyondMaxEditsIsStillCorrect(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	a := randomLines(r, 3*MaxEdits)
	b := randomLines(r, 3*MaxEdits)
	ops := Diff(a, b)
	var gotB []string
	for _, o := range ops {
		if o.Kind != Delete {
			gotB = append(gotB, o.Line)
		}
	}
	if strings.Join(gotB, "") != strings.Join(b, "") {
		t.Fatal("script does not produce b")
	}
}

func BenchmarkUnifiedSmallChange(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 2000; i++ {
		sb.WriteString("line ")
		sb.WriteString(strings.Repeat("x", i%40))
		sb.WriteString("\n")
	}
	old := sb.String()
	new := strings.Replace(old, "line xxxxx\n", "line yyyyy\n", 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Unified("a", "b", old, new, 3)
	}
}
