// Package glob matches slash-separated names against patterns whose
// segments are path.Match patterns (*, ?, [...]) and in which a "**"
// segment matches any number of segments, none included: the globs of
// wfgen.yaml's exclude (file paths) and of wfgen breaking's --allow
// subjects (FAMILY/TASK/FIELD).
package glob

import (
	"path"
	"strings"
)

// Check returns the first segment of pattern that is not a path.Match
// pattern, with path.Match's error; "" and nil when every segment is one.
func Check(pattern string) (segment string, err error) {
	for _, seg := range strings.Split(pattern, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return seg, err
		}
	}
	return "", nil
}

// Match reports whether name matches pattern, segment by segment; a
// malformed segment matches nothing.
func Match(pattern, name string) bool {
	return match(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func match(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for pat = pat[1:]; len(pat) > 0 && pat[0] == "**"; pat = pat[1:] {
			}
			if len(pat) == 0 {
				return true
			}
			for i := range len(name) + 1 {
				if match(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
