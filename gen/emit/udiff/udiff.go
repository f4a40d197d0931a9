// Package udiff computes line diffs (Myers' O(ND) algorithm) and prints them
// in the unified format of diff -u and git diff.
package udiff

import (
	"fmt"
	"strings"
)

// MaxEdits bounds the edit distance the Myers search explores (memory grows
// with its square). Inputs that differ more are shown as one hunk that
// deletes every old line and inserts every new one — still a correct diff.
const MaxEdits = 4000

// Kind says what an Op does.
type Kind byte

// The kinds of line operations.
const (
	// Equal keeps a line of both inputs.
	Equal Kind = ' '
	// Delete removes a line of the old input.
	Delete Kind = '-'
	// Insert adds a line of the new input.
	Insert Kind = '+'
)

// Op is one line of an edit script.
type Op struct {
	// Kind is Equal, Delete or Insert.
	Kind Kind
	// Line is the line, with its "\n" when it had one.
	Line string
}

// Lines splits s into lines, each keeping its trailing "\n"; the last line
// has none when s does not end with a newline.
func Lines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Diff returns a shortest edit script turning a into b (up to MaxEdits
// changes; beyond that, all of a deleted and all of b inserted).
func Diff(a, b []string) []Op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]Op, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		ops = append(ops, Op{Equal, l})
	}
	ops = append(ops, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, Op{Equal, l})
	}
	return ops
}

// myers is the forward greedy Myers search with a trace for backtracking.
func myers(a, b []string) []Op {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	limit := min(n+m, MaxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // trace[d] holds v[-d..d] before step d
	for d := 0; d <= limit; d++ {
		snap := make([]int, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, d)
			}
		}
	}
	return replaceAll(a, b)
}

func backtrack(a, b []string, trace [][]int, dEnd int) []Op {
	x, y := len(a), len(b)
	var rev []Op
	for d := dEnd; d > 0; d-- {
		vs := trace[d] // v before step d, indexed k+d
		get := func(k int) int { return vs[k+d] }
		k := x - y
		var prevK int
		if k == -d || (k != d && get(k-1) < get(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := get(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, Op{Equal, a[x]})
		}
		if prevK == k+1 {
			y--
			rev = append(rev, Op{Insert, b[y]})
		} else {
			x--
			rev = append(rev, Op{Delete, a[x]})
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, Op{Equal, a[x]})
	}
	ops := make([]Op, len(rev))
	for i, o := range rev {
		ops[len(rev)-1-i] = o
	}
	return ops
}

func replaceAll(a, b []string) []Op {
	ops := make([]Op, 0, len(a)+len(b))
	for _, l := range a {
		ops = append(ops, Op{Delete, l})
	}
	for _, l := range b {
		ops = append(ops, Op{Insert, l})
	}
	return ops
}

// Unified returns the unified diff turning old into new, with the given
// number of context lines and the names for the "---" and "+++" lines, or
// "" when the inputs are equal.
func Unified(oldName, newName, old, new string, context int) string {
	if old == new {
		return ""
	}
	ops := Diff(Lines(old), Lines(new))
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", oldName, newName)

	// Positions (0-based) of each op in old and new.
	type pos struct{ a, b int }
	at := make([]pos, len(ops)+1)
	for i, o := range ops {
		at[i+1] = at[i]
		if o.Kind != Insert {
			at[i+1].a++
		}
		if o.Kind != Delete {
			at[i+1].b++
		}
	}
	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].Kind == Equal {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(0, i-context)
		end := i
		// Extend the hunk while the next change is within 2*context lines.
		for {
			for end < len(ops) && ops[end].Kind != Equal {
				end++
			}
			next := end
			for next < len(ops) && ops[next].Kind == Equal {
				next++
			}
			if next < len(ops) && next-end <= 2*context {
				end = next
				continue
			}
			end = min(len(ops), end+context)
			break
		}
		writeHunk(&b, ops[start:end], at[start].a, at[start].b)
		i = end
	}
	return b.String()
}

func writeHunk(b *strings.Builder, ops []Op, a0, b0 int) {
	na, nb := 0, 0
	for _, o := range ops {
		if o.Kind != Insert {
			na++
		}
		if o.Kind != Delete {
			nb++
		}
	}
	fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(a0, na), hunkRange(b0, nb))
	for _, o := range ops {
		b.WriteByte(byte(o.Kind))
		b.WriteString(o.Line)
		if !strings.HasSuffix(o.Line, "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a 0-based start and a count as diff -u does.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
