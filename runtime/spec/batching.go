package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Problem is one rule a spec breaks, located relative to the value that was
// checked. The manifest validator turns it into a located diagnostic; the
// runtime into an error.
type Problem struct {
	// Path locates the offending value relative to the checked value, as
	// JSON Pointer segments without the leading '/': "batching",
	// "batching/pad_to_batch_sizes/2". "" is the checked value itself.
	Path string
	// Key says the problem is that the member at Path is there at all
	// (point at its key), not what its value is.
	Key bool
	// Message says what is wrong and what would be right. It does not name
	// the task or family: the caller says where.
	Message string
}

// String formats the problem as "PATH: MESSAGE" (just MESSAGE when Path is "").
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// JoinProblems formats problems one after the other, separated by "; ".
func JoinProblems(ps []Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// IsStacked reports whether batching stacks values of the field: a
// call_kwargs field of kind tensor, image or video. Each item's value
// becomes one row of a tensor with a new first dimension. Other values,
// tensor_list included, are passed to the batched call as they are and must
// be equal across the items of a batch.
func (f *InferenceFieldSpec) IsStacked() bool {
	return f.CallKwarg() && f.Kind.Stacked()
}

// BatchingProblems checks that the task can be batched as its batching
// block says; it returns nil when the task has no batching block. The
// rules, with paths relative to the task:
//
//   - "batching" (the key): a stream task cannot be batched.
//   - "batching" (the key): the task has a required input that batching
//     stacks (InferenceFieldSpec.IsStacked), so every item brings its own
//     row. Without one the items of a batch would share one call and its
//     output would be cut into "items" that are not theirs.
//   - "batching/...": the sizes follow BatchSizeProblems.
//
// wfgen validate reports these at the task's batching key, and
// runtime/client refuses to batch such a task with the same messages.
func (t *InferenceTaskProfile) BatchingProblems() []Problem {
	b := t.Batching
	if b == nil {
		return nil
	}
	var ps []Problem
	if t.Stream {
		ps = append(ps, Problem{Path: "batching", Key: true, Message: "a stream task cannot be batched; remove batching or stream"})
	}
	var optional []string
	required := false
	for i := range t.Inputs {
		f := &t.Inputs[i]
		if !f.IsStacked() {
			continue
		}
		if f.Required {
			required = true
			break
		}
		optional = append(optional, strconv.Quote(f.FieldID))
	}
	switch {
	case required:
	case len(optional) > 0:
		ps = append(ps, Problem{Path: "batching", Key: true, Message: fmt.Sprintf(
			"batching stacks each item's tensor, image and video inputs into one call, but none of them is required (%s), so an item may bring nothing to stack; make one required or remove batching",
			strings.Join(optional, ", "))})
	default:
		ps = append(ps, Problem{Path: "batching", Key: true, Message: "batching stacks each item's tensor, image and video inputs into one call, but the task has no call_kwargs field of kind tensor, image or video (tensor_list values are not stacked), so all items would share one call; remove batching"})
	}
	for _, p := range BatchSizeProblems(b.MaxBatchSize, b.PadToBatchSizes) {
		p.Path = "batching/" + p.Path
		ps = append(ps, p)
	}
	return ps
}

// BatchSizeProblems checks a max batch size and static pad sizes, whether
// they come from a manifest's batching block or from options given at run
// time (runtime/batch.NewConfig). Paths are relative to the batching block.
// The rules:
//
//   - max_batch_size is at least 1;
//   - every pad size is at least 1;
//   - pad sizes are strictly increasing (they are not sorted for you);
//   - no pad size exceeds max_batch_size;
//   - the largest pad size equals max_batch_size, so every batch has a
//     static size.
//
// Comparisons with max_batch_size are skipped when it is below 1.
func BatchSizeProblems(maxBatchSize int, padSizes []int) []Problem {
	var ps []Problem
	if maxBatchSize < 1 {
		ps = append(ps, Problem{Path: "max_batch_size", Message: fmt.Sprintf("max_batch_size %d must be at least 1", maxBatchSize)})
	}
	prev := 0
	for j, n := range padSizes {
		// The path is built for a problem only: a config without one (every
		// batched call checks its own) allocates nothing here.
		path := func() string { return "pad_to_batch_sizes/" + strconv.Itoa(j) }
		switch {
		case n < 1:
			ps = append(ps, Problem{Path: path(), Message: fmt.Sprintf("pad_to_batch_sizes entry %d must be at least 1", n)})
		case n <= prev:
			ps = append(ps, Problem{Path: path(), Message: fmt.Sprintf("pad_to_batch_sizes must be strictly increasing (%d follows %d)", n, prev)})
		case maxBatchSize >= 1 && n > maxBatchSize:
			ps = append(ps, Problem{Path: path(), Message: fmt.Sprintf("pad_to_batch_sizes entry %d exceeds max_batch_size %d", n, maxBatchSize)})
		}
		prev = max(prev, n)
	}
	if len(padSizes) > 0 && maxBatchSize >= 1 && prev < maxBatchSize {
		ps = append(ps, Problem{Path: "pad_to_batch_sizes", Message: fmt.Sprintf(
			"the largest of pad_to_batch_sizes is %d, but max_batch_size is %d; end the list with %d so every batch has a static size",
			prev, maxBatchSize, maxBatchSize)})
	}
	return ps
}

// SessionBatchingProblems checks a task's session_batching block; nil when
// there is none. The rules, with paths relative to the task:
//
//   - "session_batching" (the key): only a streaming task has sessions
//     (a stream task's batching is refused by BatchingProblems).
//   - "session_batching/max_batch_size": at least 1.
//
// wfgen validate reports these, and runtime/client refuses to batch such a
// task's sessions with the same messages.
func (t *InferenceTaskProfile) SessionBatchingProblems() []Problem {
	b := t.SessionBatching
	if b == nil {
		return nil
	}
	var ps []Problem
	if !t.Stream {
		ps = append(ps, Problem{Path: "session_batching", Key: true, Message: "session_batching batches the steps of a streaming task's sessions, and this task is not one (stream: true); use batching for calls, or remove session_batching"})
	}
	for _, p := range BatchSizeProblems(b.MaxBatchSize, nil) {
		p.Path = "session_batching/" + p.Path
		ps = append(ps, p)
	}
	return ps
}
