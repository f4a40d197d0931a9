package artifactio

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Write writes an artifact to path in the format its extension names,
// atomically:
//
//	video      (*tensor.Video)     .gif (animated, default GIFOptions), .npy (the frames)
//	image      (*tensor.Image)     .png, .npy
//	embedding  (*tensor.Embedding) .npy, .json
//	tensor     (*tensor.Tensor)    .npy, .json
//	text       (string)             any extension (the text as UTF-8)
//	JSON       (json.RawMessage)    any extension (the JSON, newline-terminated)
//
// Use WritePNGFrames for a folder of frames and WriteGIF for GIF options.
// Any other combination is an error naming the accepted extensions.
func Write(path string, artifact any) error {
	ext := strings.ToLower(filepath.Ext(path))
	bad := func(kind string, exts ...string) error {
		return fmt.Errorf("%s: cannot write a %s artifact as %q (accepted: %s)", path, kind, ext, strings.Join(exts, ", "))
	}
	switch a := artifact.(type) {
	case tensor.Video:
		return Write(path, &a)
	case tensor.Image:
		return Write(path, &a)
	case tensor.Embedding:
		return Write(path, &a)
	case *tensor.Video:
		switch ext {
		case ".gif":
			return WriteGIF(path, a, nil)
		case ".npy":
			if _, _, _, _, err := videoDims(a); err != nil {
				return err
			}
			return WriteNPY(path, a.Frames)
		}
		return bad("video", ".gif", ".npy")
	case *tensor.Image:
		switch ext {
		case ".png":
			return WritePNG(path, a)
		case ".npy":
			if _, _, _, err := imageDims(a); err != nil {
				return err
			}
			return WriteNPY(path, a.Pixels)
		}
		return bad("image", ".png", ".npy")
	case *tensor.Embedding:
		if a == nil {
			return fmt.Errorf("%s: nil embedding", path)
		}
		if _, err := tensor.AsEmbedding(a.Vector); err != nil {
			return err
		}
		switch ext {
		case ".npy":
			return WriteNPY(path, a.Vector)
		case ".json":
			return WriteJSON(path, a.Vector)
		}
		return bad("embedding", ".npy", ".json")
	case *tensor.Tensor:
		switch ext {
		case ".npy":
			return WriteNPY(path, a)
		case ".json":
			return WriteJSON(path, a)
		}
		return bad("tensor", ".npy", ".json")
	case string:
		return WriteFileAtomic(path, func(w io.Writer) error {
			_, err := io.WriteString(w, a)
			return err
		})
	case json.RawMessage:
		if !json.Valid(a) {
			return fmt.Errorf("%s: the JSON artifact is not valid JSON", path)
		}
		return WriteFileAtomic(path, func(w io.Writer) error {
			if _, err := w.Write(a); err != nil {
				return err
			}
			if len(a) == 0 || a[len(a)-1] != '\n' {
				_, err := w.Write([]byte{'\n'})
				return err
			}
			return nil
		})
	}
	return fmt.Errorf("%s: %T is not an artifact (want *tensor.Video, *tensor.Image, *tensor.Embedding, *tensor.Tensor, string or json.RawMessage)", path, artifact)
}

// ConcatVideos joins videos (for example the chunks of a stream) into one,
// in order. Every video must have the same height, width and channels; the
// result takes the first video's FPS.
func ConcatVideos(videos ...*tensor.Video) (*tensor.Video, error) {
	if len(videos) == 0 {
		return nil, fmt.Errorf("concat: no videos")
	}
	var total int
	var h0, w0, c0 int
	for i, v := range videos {
		t, h, w, c, err := videoDims(v)
		if err != nil {
			return nil, fmt.Errorf("concat: video %d: %w", i, err)
		}
		if i == 0 {
			h0, w0, c0 = h, w, c
		} else if h != h0 || w != w0 || c != c0 {
			return nil, fmt.Errorf("concat: video %d has frames %d×%d×%d, video 0 has %d×%d×%d (H×W×C)", i, h, w, c, h0, w0, c0)
		}
		total += t
	}
	data := make([]byte, 0, total*h0*w0*c0)
	for _, v := range videos {
		data = append(data, v.Frames.Data...)
	}
	return &tensor.Video{
		Frames: tensor.FromUint8(data, int64(total), int64(h0), int64(w0), int64(c0)),
		FPS:    videos[0].FPS,
	}, nil
}
