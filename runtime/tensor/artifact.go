package tensor

import (
	"encoding/json"
	"fmt"
)

// Video is a video artifact: uint8 frames shaped [T, H, W, C] (C is 1, 3 or 4)
// and a playback rate.
type Video struct {
	// Frames holds the pixels, uint8 [T, H, W, C].
	Frames *Tensor
	// FPS is the playback rate; 0 when nothing said (writers then use
	// DefaultVideoFPS). Generated code sets the manifest's rate
	// (ModelInferenceSpec.VideoFPS).
	FPS float64
}

// Image is an image artifact: uint8 pixels shaped [H, W, C].
type Image struct {
	// Pixels holds the pixels, uint8 [H, W, C].
	Pixels *Tensor
}

// Embedding is an embedding artifact: a floating tensor shaped [D] (one
// item) or [N, D].
type Embedding struct {
	// Vector holds the embedding.
	Vector *Tensor
}

// AsTensor converts an engine output value into a tensor artifact.
func AsTensor(v any) (*Tensor, error) {
	t, ok := v.(*Tensor)
	if !ok || t == nil {
		return nil, fmt.Errorf("want a tensor, got %s", describeValue(v))
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// AsTensorList converts an engine output value (a list of tensors, []any
// or []*Tensor) into a tensor_list artifact; an element that is not a
// well-formed tensor is an error naming its index.
func AsTensorList(v any) ([]*Tensor, error) {
	switch x := v.(type) {
	case []*Tensor:
		for i, t := range x {
			if _, err := AsTensor(t); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return x, nil
	case []any:
		out := make([]*Tensor, len(x))
		for i, e := range x {
			t, err := AsTensor(e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = t
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of tensors, got %s", describeValue(v))
}

// AsVideo converts an engine output value (a uint8 [T,H,W,C] tensor) into a
// video artifact playing at fps (ModelInferenceSpec.VideoFPS gives a
// manifest artifact's rate).
func AsVideo(v any, fps float64) (*Video, error) {
	t, err := AsTensor(v)
	if err != nil {
		return nil, err
	}
	if t.DType != Uint8 || len(t.Shape) != 4 || !validChannels(t.Shape[3]) {
		return nil, fmt.Errorf("video: want uint8 [T,H,W,C] with C in {1,3,4}, got %s%v", t.DType, t.Shape)
	}
	return &Video{Frames: t, FPS: fps}, nil
}

// AsImage converts an engine output value (a uint8 [H,W,C] tensor) into an
// image artifact.
func AsImage(v any) (*Image, error) {
	t, err := AsTensor(v)
	if err != nil {
		return nil, err
	}
	if t.DType != Uint8 || len(t.Shape) != 3 || !validChannels(t.Shape[2]) {
		return nil, fmt.Errorf("image: want uint8 [H,W,C] with C in {1,3,4}, got %s%v", t.DType, t.Shape)
	}
	return &Image{Pixels: t}, nil
}

// AsEmbedding converts an engine output value (a floating [D] or [N,D]
// tensor) into an embedding artifact.
func AsEmbedding(v any) (*Embedding, error) {
	t, err := AsTensor(v)
	if err != nil {
		return nil, err
	}
	if !t.DType.IsFloating() || (len(t.Shape) != 1 && len(t.Shape) != 2) {
		return nil, fmt.Errorf("embedding: want a floating [D] or [N,D] tensor, got %s%v", t.DType, t.Shape)
	}
	return &Embedding{Vector: t}, nil
}

// AsText converts an engine output value (a str) into a text artifact.
func AsText(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("text: want a string, got %s", describeValue(v))
	}
	return s, nil
}

// AsJSON converts an engine output value (a str holding JSON, or a dict,
// list or scalar without tensors) into raw JSON.
func AsJSON(v any) (json.RawMessage, error) {
	if s, ok := v.(string); ok {
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("json: string output is not valid JSON")
		}
		return json.RawMessage(s), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("json: %v", err)
	}
	return b, nil
}

func validChannels(c int64) bool { return c == 1 || c == 3 || c == 4 }

func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case *Tensor:
		if x == nil {
			return "nil tensor"
		}
		return fmt.Sprintf("tensor %s%v", x.DType, x.Shape)
	default:
		return fmt.Sprintf("%T", v)
	}
}
