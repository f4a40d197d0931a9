package artifactio

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// framePrefix and frameExt frame the names of PNG frame files.
const (
	framePrefix = "frame_"
	frameExt    = ".png"
)

// FrameName returns the file name of frame i of a video with n frames:
// "frame_" plus i zero-padded to at least five digits (more when n needs
// them, so names always sort in frame order) plus ".png".
func FrameName(i, n int) string {
	width := max(5, len(strconv.Itoa(max(n-1, 0))))
	return fmt.Sprintf("%s%0*d%s", framePrefix, width, i, frameExt)
}

// isFrameName reports whether name looks like a FrameName output.
func isFrameName(name string) bool {
	digits, ok := strings.CutPrefix(name, framePrefix)
	if !ok {
		return false
	}
	digits, ok = strings.CutSuffix(digits, frameExt)
	if !ok || len(digits) < 5 {
		return false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// WritePNGFrames writes each frame of a video as a PNG file named by
// FrameName in the folder dir and returns the paths in frame order. The
// frames are written into a temporary folder beside dir that then takes its
// place, so dir holds either the complete earlier output or the complete new
// one. An existing dir is replaced only when it holds nothing but frame
// files; otherwise the call fails and touches nothing.
func WritePNGFrames(dir string, v *tensor.Video) ([]string, error) {
	t, h, w, c, err := videoDims(v)
	if err != nil {
		return nil, err
	}
	n := h * w * c
	names := make([]string, t)
	err = writeDirAtomic(dir, isFrameName, func(tmp string) error {
		for i := range t {
			names[i] = FrameName(i, t)
			m := goImage(v.Frames.Data[i*n:(i+1)*n], h, w, c)
			f, err := os.OpenFile(filepath.Join(tmp, names[i]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
			if err != nil {
				return err
			}
			if err := pngEncoder.Encode(f, m); err != nil {
				f.Close()
				return fmt.Errorf("frame %d: %w", i, err)
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	paths := make([]string, t)
	for i, name := range names {
		paths[i] = filepath.Join(dir, name)
	}
	return paths, nil
}
