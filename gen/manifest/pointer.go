package manifest

import (
	"strconv"
	"strings"
)

// JoinPointer builds a JSON pointer (RFC 6901) from unescaped segments:
// JoinPointer("tasks", "0", "inputs") is "/tasks/0/inputs".
func JoinPointer(segments ...string) string {
	n := 0
	for _, s := range segments {
		n += 1 + len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range segments {
		b.WriteByte('/')
		if strings.ContainsAny(s, "~/") {
			s = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
		}
		b.WriteString(s)
	}
	return b.String()
}

// SplitPointer splits a JSON pointer into unescaped segments; "" (the whole
// document) has none.
func SplitPointer(pointer string) []string {
	if pointer == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, p := range parts {
		if strings.Contains(p, "~") {
			parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		}
	}
	return parts
}

// lookup walks pointer from the root. It returns the deepest node reached,
// the mapping key that led to it (nil for the root and sequence items) and
// whether the whole pointer was found.
func (f *File) lookup(pointer string) (node *posNode, key *keyPos, found bool) {
	if f == nil || f.pos.line == 0 {
		return nil, nil, false
	}
	node = &f.pos
	for _, seg := range SplitPointer(pointer) {
		var next *posNode
		var nextKey *keyPos
		if node.keys != nil {
			for i := range node.keys {
				if node.keys[i].name == seg {
					next, nextKey = &node.kids[i], &node.keys[i]
					break
				}
			}
		} else if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(node.kids) {
			next = &node.kids[i]
		}
		if next == nil {
			return node, key, false
		}
		node, key = next, nextKey
	}
	return node, key, true
}

// Position returns the 1-based line and column of the value at pointer
// ("/tasks/0/inputs/2/default"). A scalar or flow-style value is reported
// where it starts; a block mapping or sequence under a key is reported at
// its key. When the pointer does not exist (a missing key), the position of
// the nearest existing ancestor is returned. An unknown file yields 1, 1.
func (f *File) Position(pointer string) (line, col int) {
	node, key, _ := f.lookup(pointer)
	if node == nil {
		return 1, 1
	}
	if key != nil && node.block {
		return int(key.line), int(key.col)
	}
	return int(node.line), int(node.col)
}

// KeyPosition returns the position of the mapping key that pointer's last
// segment names, for errors about the key itself (an unknown or duplicate
// key). It falls back to Position when pointer does not end at a key.
func (f *File) KeyPosition(pointer string) (line, col int) {
	_, key, found := f.lookup(pointer)
	if !found || key == nil {
		return f.Position(pointer)
	}
	return int(key.line), int(key.col)
}

// Has reports whether pointer names a value present in the file.
func (f *File) Has(pointer string) bool {
	_, _, found := f.lookup(pointer)
	return found
}

// Pointer builds a JSON pointer from segments that are strings (member
// names) and ints (array indexes): Pointer("tasks", 0, "inputs") is
// "/tasks/0/inputs". A segment of another type is left empty.
func Pointer(segments ...any) string {
	s := make([]string, len(segments))
	for i, x := range segments {
		switch v := x.(type) {
		case string:
			s[i] = v
		case int:
			s[i] = strconv.Itoa(v)
		}
	}
	return JoinPointer(s...)
}
