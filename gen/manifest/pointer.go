package manifest

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
// the mapping key node that led to it (nil for the root and sequence items)
// and whether the whole pointer was found.
func (f *File) lookup(pointer string) (node, key *yaml.Node, found bool) {
	node = f.root
	if node == nil {
		return nil, nil, false
	}
	for _, seg := range SplitPointer(pointer) {
		for node.Kind == yaml.AliasNode && node.Alias != nil {
			node = node.Alias
		}
		var next, nextKey *yaml.Node
		switch node.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(node.Content); i += 2 {
				k := node.Content[i]
				for k.Kind == yaml.AliasNode && k.Alias != nil {
					k = k.Alias
				}
				if k.Kind == yaml.ScalarNode && k.Value == seg {
					next, nextKey = node.Content[i+1], node.Content[i]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(node.Content) {
				next = node.Content[i]
			}
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
	if key != nil && (node.Kind == yaml.MappingNode || node.Kind == yaml.SequenceNode) && node.Style&yaml.FlowStyle == 0 {
		return key.Line, key.Column
	}
	if node.Line == 0 {
		return 1, 1
	}
	return node.Line, node.Column
}

// KeyPosition returns the position of the mapping key that pointer's last
// segment names, for errors about the key itself (an unknown or duplicate
// key). It falls back to Position when pointer does not end at a key.
func (f *File) KeyPosition(pointer string) (line, col int) {
	_, key, found := f.lookup(pointer)
	if !found || key == nil {
		return f.Position(pointer)
	}
	return key.Line, key.Column
}

// Has reports whether pointer names a value present in the file.
func (f *File) Has(pointer string) bool {
	_, _, found := f.lookup(pointer)
	return found
}
