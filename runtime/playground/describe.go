package playground

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/pixels"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Family is the page data of one served family: everything the page's
// script needs to build its forms and read its results, derived from the
// family's spec. Names, datatypes, shapes, presence, defaults and choices
// are those of the server's metadata (oip.TaskInputs, oip.TaskOutputs), so
// the page sends exactly what the server takes.
type Family struct {
	// ID is the family id: the OIP model name.
	ID string `json:"id"`
	// Name is the display name (the id when the manifest gives none).
	Name string `json:"name"`
	// Description is the family's description.
	Description string `json:"description,omitempty"`
	// Versions are the variant ids, the default first.
	Versions []string `json:"versions"`
	// DefaultTask is the task shown first.
	DefaultTask string `json:"default_task"`
	// Tasks are the family's tasks, in manifest order.
	Tasks []Task `json:"tasks"`
}

// Task is one task's form.
type Task struct {
	// ID is the task id, sent as the request parameter "task".
	ID string `json:"id"`
	// Label and Description are the manifest's.
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	// Stream marks a realtime task: the page shows a live view.
	Stream bool `json:"stream,omitempty"`
	// Inputs are the task's fields, in call order.
	Inputs []Field `json:"inputs"`
	// Outputs are the task's artifacts.
	Outputs []Output `json:"outputs"`
	// Realtime is the live view's cadence and controls (stream tasks).
	Realtime *Realtime `json:"realtime,omitempty"`
}

// Field is one input field: the form control's kind, bounds and help.
type Field struct {
	// Name is the input tensor's name (the field id; FIELD.0 for a
	// tensor_list).
	Name string `json:"name"`
	// Label and Description are the manifest's.
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	// Kind is the field's kind (string, int, float, bool, tensor, image,
	// video, the lists).
	Kind spec.Kind `json:"kind"`
	// Datatype and Shape are the input tensor's, as the server's metadata
	// gives them (-1: any size; a nil shape: any rank).
	Datatype oip.Datatype `json:"datatype"`
	Shape    []int64      `json:"shape"`
	// Presence is required, defaulted or optional.
	Presence string `json:"presence"`
	// Default is the manifest default, in the kind's JSON form.
	Default any `json:"default,omitempty"`
	// Choices are the only values accepted (a select).
	Choices []string `json:"choices,omitempty"`
	// Minimum and Maximum bound a number (and a list's items).
	Minimum *spec.Number `json:"minimum,omitempty"`
	Maximum *spec.Number `json:"maximum,omitempty"`
	// MultipleOf and Remainder: an int is Remainder plus a multiple of
	// MultipleOf (4k+1).
	MultipleOf *int64 `json:"multiple_of,omitempty"`
	Remainder  int64  `json:"remainder,omitempty"`
	// MinLength and MaxLength bound a string's or a list's length.
	MinLength *int `json:"min_length,omitempty"`
	MaxLength *int `json:"max_length,omitempty"`
	// Pattern is the RE2 expression a string matches.
	Pattern string `json:"pattern,omitempty"`
	// Picture says how a picture becomes the tensor (image and video
	// fields).
	Picture *Picture `json:"picture,omitempty"`
}

// Picture is how the page turns a picture into an image or video field's
// tensor, or an artifact's tensor into a picture.
type Picture struct {
	// Layout is HWC or CHW (a video has frames first).
	Layout string `json:"layout"`
	// Channels is the channel order: RGB, BGR, L or RGBA.
	Channels string `json:"channels"`
	// Levels, for a field of floating dtype, is the value each 8-bit level
	// of each channel becomes, as runtime/pixels computes it (range, mean
	// and std applied in float32): the page looks values up, so a picture
	// sent from the page is the tensor Go would make of it. Absent for
	// integer dtypes, which take the levels as they are.
	Levels [][]float64 `json:"levels,omitempty"`
	// Range is an artifact's [lo, hi]; with Mean and Std it undoes the
	// artifact's conversion (runtime/pixels' Artifact rule):
	// level = ((v*std + mean) - lo) / (hi - lo) * 255.
	Range []float64 `json:"range,omitempty"`
	// Mean and Std are an artifact's per-channel normalisation.
	Mean []float64 `json:"mean,omitempty"`
	Std  []float64 `json:"std,omitempty"`
}

// Output is one artifact and how the page shows it.
type Output struct {
	// Name is the output's name (the artifact id).
	Name string `json:"name"`
	// Kind is the artifact kind: video and image on a canvas, embedding and
	// tensor as a plot, text and json as text.
	Kind spec.ArtifactKind `json:"kind"`
	// Datatype and Shape are the server's metadata.
	Datatype oip.Datatype `json:"datatype"`
	Shape    []int64      `json:"shape"`
	// Description is the manifest's.
	Description string `json:"description,omitempty"`
	// FPS is the playback rate of a video (spec.ModelInferenceSpec.VideoFPS).
	FPS int `json:"fps,omitempty"`
	// Picture undoes an image or video artifact's conversion.
	Picture *Picture `json:"picture,omitempty"`
	// Count is, for a tensor_list, the response parameter that gives its
	// element count (oip.CountParameter): the list arrives as one output
	// per element, NAME.0, NAME.1, ..., each shown on its own.
	Count string `json:"count,omitempty"`
	// Fields are, for a record or record_list, its keys in the manifest's
	// order; Count is then the response parameter that gives the number
	// of keys (record) or dicts (record_list). Key KEY arrives as the
	// output NAME.KEY, of dict I as NAME.I.KEY (runtime/oip's records.go):
	// the page shows a record as a table of its keys, a record_list as one
	// such table per dict.
	Fields []string `json:"fields,omitempty"`
	// Role, in a classification family (workload_type classification),
	// marks what the page shows as the answer: RoleScores for a float
	// output of one score per class (logits or probabilities), RoleClass
	// for an integer output of one value, the class chosen. The page shows
	// the top class and its probability, and the scores as bars labelled
	// with the class index.
	Role string `json:"role,omitempty"`
}

// The roles of an output in a classification family (Output.Role).
const (
	RoleScores = "class_scores"
	RoleClass  = "class"
)

// outputRole is the role of output md of a family of workload w: only a
// classification's one-dimensional float output (after the batch
// dimension) of at least two scores, and its integer output of one value.
func outputRole(w string, md oip.TensorMetadata) string {
	if w != "classification" {
		return ""
	}
	per := md.Shape
	if len(per) > 0 && per[0] == 1 {
		per = per[1:]
	}
	switch md.Datatype {
	case oip.FP32, oip.FP64, oip.FP16, oip.BF16:
		if len(per) == 1 && (per[0] < 0 || per[0] >= 2) {
			return RoleScores
		}
	case oip.Int64, oip.Int32, oip.Int16, oip.Int8, oip.Uint8:
		if len(per) == 0 || len(per) == 1 && per[0] == 1 {
			return RoleClass
		}
	}
	return ""
}

// Realtime is a stream task's live view.
type Realtime struct {
	// FPS is the rate the page asks for frames at.
	FPS int `json:"fps"`
	// Controls are the session's controls with their keys.
	Controls []Control `json:"controls"`
}

// Control is one realtime control and the keys bound to it.
type Control struct {
	// Name is the control's name.
	Name string `json:"name"`
	// Keys are KeyboardEvent.key values that hold it, the first shown.
	Keys []string `json:"keys"`
}

// Describe returns the page data of a family.
func Describe(s *spec.ModelInferenceSpec) (*Family, error) {
	if s == nil {
		return nil, errors.New("playground: a nil spec")
	}
	fam := &Family{ID: s.ModelFamilyID, Name: s.DisplayName, Description: s.Description, DefaultTask: s.DefaultTask()}
	if fam.Name == "" {
		fam.Name = s.ModelFamilyID
	}
	def := s.DefaultVariant()
	fam.Versions = append(fam.Versions, def)
	for _, v := range s.Variants {
		if v.VariantID != def {
			fam.Versions = append(fam.Versions, v.VariantID)
		}
	}
	for i := range s.Tasks {
		t, err := describeTask(s, &s.Tasks[i])
		if err != nil {
			return nil, fmt.Errorf("playground: %s task %s: %w", s.ModelFamilyID, s.Tasks[i].TaskID, err)
		}
		fam.Tasks = append(fam.Tasks, t)
	}
	return fam, nil
}

func describeTask(s *spec.ModelInferenceSpec, t *spec.InferenceTaskProfile) (Task, error) {
	out := Task{ID: t.TaskID, Label: t.Label, Description: t.Description, Stream: t.Stream,
		Inputs: []Field{}, Outputs: []Output{}}
	if out.Label == "" {
		out.Label = t.TaskID
	}
	// A field with parts has one input per part (oip.TaskInputs); each is
	// a field of the page, labelled with the part.
	mds := oip.TaskInputs(t)
	var fields []*spec.InferenceFieldSpec
	for i := range t.Inputs {
		n := 1
		if t.Inputs[i].Kind.HasParts() {
			n = len(t.Inputs[i].Fields)
		}
		for range n {
			fields = append(fields, &t.Inputs[i])
		}
	}
	for i, md := range mds {
		f := fields[i]
		presence, _ := md.Parameters["presence"].(string)
		fd := Field{Name: md.Name, Label: f.Label, Description: f.Description, Kind: f.Kind.Effective(),
			Datatype: md.Datatype, Shape: md.Shape, Presence: presence, Choices: f.Choices,
			Minimum: f.Minimum, Maximum: f.Maximum, MultipleOf: f.MultipleOf, Remainder: f.Remainder,
			MinLength: f.MinLength, MaxLength: f.MaxLength, Pattern: f.Pattern}
		if fd.Label == "" {
			fd.Label = f.FieldID
		}
		if f.Kind.HasParts() {
			fd.Label += " " + strings.TrimPrefix(md.Name, f.FieldID+".")
		}
		if d, ok := md.Parameters["default"]; ok {
			if text, isText := d.(string); isText && f.Kind.IsList() {
				var v any
				if err := json.Unmarshal([]byte(text), &v); err == nil {
					d = v
				}
			}
			fd.Default = d
		}
		if f.Kind.IsPicture() {
			p, err := fieldPicture(f, md.Datatype)
			if err != nil {
				return Task{}, fmt.Errorf("field %s: %w", f.FieldID, err)
			}
			fd.Picture = p
		}
		out.Inputs = append(out.Inputs, fd)
	}
	for i, md := range oip.TaskOutputs(t) {
		a := &t.Outputs[i]
		o := Output{Name: md.Name, Kind: a.Kind, Datatype: md.Datatype, Shape: md.Shape, Description: a.Description}
		if a.Kind.Holds() == spec.HoldsTensor && !a.Kind.IsPicture() { // tensor, embedding
			o.Role = outputRole(s.WorkloadType, md)
		}
		if a.Kind.Holds() == spec.HoldsTensorList {
			o.Count = oip.CountParameter(a.ArtifactID)
		}
		if a.Kind.Holds().IsRecord() {
			o.Count = oip.CountParameter(a.ArtifactID)
			for _, f := range a.Fields {
				o.Fields = append(o.Fields, f.Name)
			}
		}
		if a.Kind.Picture() == spec.PictureVideo {
			o.FPS = s.VideoFPS(a)
		}
		if a.Kind.IsPicture() {
			im := a.Image
			if im == nil {
				im = &spec.ImageSpec{}
			}
			o.Picture = &Picture{Layout: im.LayoutName(), Channels: im.ChannelOrder(), Range: im.Range, Mean: im.Mean, Std: im.Std}
		}
		out.Outputs = append(out.Outputs, o)
	}
	if t.Stream {
		rt := spec.DefaultRealtimeSpec()
		if s.Realtime != nil {
			rt = *s.Realtime
		}
		out.Realtime = &Realtime{FPS: rt.FPS, Controls: BindKeys(rt.Controls)}
	}
	return out, nil
}

// fieldPicture describes the conversion of a picture into field f's
// tensor. The levels come from runtime/pixels itself: a picture of the 256
// levels of every channel, converted as the field declares.
func fieldPicture(f *spec.InferenceFieldSpec, dt oip.Datatype) (*Picture, error) {
	im := f.Image
	if im == nil {
		im = &spec.ImageSpec{}
	}
	p := &Picture{Layout: im.LayoutName(), Channels: im.ChannelOrder()}
	floating := false
	switch dt {
	case oip.FP32, oip.FP16, oip.BF16:
		floating = true
	case oip.AnyDatatype:
		floating = len(im.Range) != 0 || len(im.Mean) != 0 // pixels' own default
	}
	if !floating {
		return p, nil
	}
	ramp := image.NewNRGBA(image.Rect(0, 0, 256, 1))
	for v := range 256 {
		ramp.SetNRGBA(v, 0, color.NRGBA{uint8(v), uint8(v), uint8(v), uint8(v)})
	}
	// The ramp converts at float32: the server rounds the page's numbers
	// to a narrower dtype as it does any JSON number.
	tf := spec.InferenceFieldSpec{FieldID: f.FieldID, Kind: spec.KindImage, DType: tensor.Float32, Image: im}
	t, err := pixels.Tensor(ramp, &tf)
	if err != nil {
		return nil, err
	}
	vals, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	c := im.ChannelCount()
	p.Levels = make([][]float64, c)
	for k := range c {
		p.Levels[k] = make([]float64, 256)
		for v := range 256 {
			i := v*c + k // HWC
			if p.Layout == spec.LayoutCHW {
				i = k*256 + v
			}
			p.Levels[k][v] = float64(vals[i])
		}
	}
	return p, nil
}

// keyNames are the default keys of well-known control names: the arrow
// keys and WASD.
var keyNames = map[string][]string{
	"up": {"ArrowUp", "w"}, "forward": {"ArrowUp", "w"},
	"down": {"ArrowDown", "s"}, "backward": {"ArrowDown", "s"}, "back": {"ArrowDown", "s"},
	"left": {"ArrowLeft", "a"}, "right": {"ArrowRight", "d"},
	"jump": {" "}, "fire": {"f"}, "action": {"e"},
}

// spareKeys are given, in order, to controls without a well-known name.
var spareKeys = []string{"i", "j", "k", "l", "u", "o", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// BindKeys returns the controls with their keys: the arrow keys and WASD
// for up/forward, down/backward, left and right, space for jump; any other
// control takes the next free key of i, j, k, l, u, o, 1–9 (none once they
// run out: it still has its button).
func BindKeys(controls []string) []Control {
	used := map[string]bool{}
	out := make([]Control, len(controls))
	for i, c := range controls {
		out[i].Name = c
		for _, k := range keyNames[c] {
			if !used[k] {
				used[k] = true
				out[i].Keys = append(out[i].Keys, k)
			}
		}
	}
	spare := slices.Clone(spareKeys)
	for i := range out {
		for len(out[i].Keys) == 0 && len(spare) > 0 {
			k := spare[0]
			spare = spare[1:]
			if !used[k] {
				used[k] = true
				out[i].Keys = []string{k}
			}
		}
		if out[i].Keys == nil {
			out[i].Keys = []string{}
		}
	}
	return out
}
