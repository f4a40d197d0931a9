package spec

import "fmt"

// OpenAISpec serves a task as OpenAI's embeddings API (wfserve's POST
// /v1/embeddings): each of the request's inputs becomes one call of the
// task with Input set to it, and the task's one embedding artifact is the
// answer.
type OpenAISpec struct {
	// Input is the id of the field that takes each input: a string field
	// takes text, an int_list field or an integer tensor field (one
	// sequence per item) takes token ids.
	Input string `json:"input" jsonschema:"required,minLength=1"`
}

// OpenAIProblems checks a task's openai block: the input field exists and
// takes text (string) or token ids (int_list, or a tensor of int64 or
// int32), the task is not a stream, and it has exactly one embedding
// artifact. Problems are located relative to the task.
func (t *InferenceTaskProfile) OpenAIProblems() []Problem {
	if t.OpenAI == nil {
		return nil
	}
	var ps []Problem
	f, ok := t.Field(t.OpenAI.Input)
	switch {
	case !ok:
		ps = append(ps, Problem{Path: "openai/input", Message: fmt.Sprintf("openai.input: the task has no input field %q", t.OpenAI.Input)})
	case f.Kind == KindString, f.Kind == KindIntList:
	case f.Kind == KindTensor && (f.DType == "int64" || f.DType == "int32"):
	default:
		ps = append(ps, Problem{Path: "openai/input", Message: fmt.Sprintf(
			"openai.input: field %q is of kind %s; OpenAI's inputs are text (a string field) or token ids (an int_list field, or a tensor of int64 or int32)", f.FieldID, f.Kind)})
	}
	if t.Stream {
		ps = append(ps, Problem{Path: "openai", Key: true, Message: "openai: a stream task cannot answer embeddings"})
	}
	if t.OpenAIArtifact() == "" {
		n := 0
		for _, a := range t.Outputs {
			if a.Kind == ArtifactEmbedding {
				n++
			}
		}
		ps = append(ps, Problem{Path: "openai", Key: true, Message: fmt.Sprintf("openai: the task has %d embedding artifacts, want exactly one (the answer)", n)})
	}
	return ps
}

// OpenAIInput returns the task's OpenAI input field and whether it takes
// text (a string field) rather than token ids; ok is false without an
// openai block or with problems (OpenAIProblems).
func (t *InferenceTaskProfile) OpenAIInput() (f *InferenceFieldSpec, text, ok bool) {
	if t.OpenAI == nil || len(t.OpenAIProblems()) > 0 {
		return nil, false, false
	}
	f, _ = t.Field(t.OpenAI.Input)
	return f, f.Kind == KindString, true
}

// OpenAIArtifact returns the id of the task's one embedding artifact, the
// answer to an embeddings request ("" when it has not exactly one).
func (t *InferenceTaskProfile) OpenAIArtifact() string {
	id, n := "", 0
	for _, a := range t.Outputs {
		if a.Kind == ArtifactEmbedding {
			id, n = a.ArtifactID, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return id
}
