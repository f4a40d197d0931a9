//go:build unix

package client

import (
	"os"
	"syscall"
)

// fileID identifies the file st describes beyond its path, size and time:
// its device and inode, so a file replaced by another (a rename over it)
// is told from the one it replaced.
func fileID(st os.FileInfo) [2]uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return [2]uint64{uint64(s.Dev), uint64(s.Ino)}
	}
	return [2]uint64{}
}
