package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// OpenAI's embeddings API, for tasks whose manifest says openai: {input:
// FIELD} (spec.OpenAISpec), so that an OpenAI SDK works against wfserve
// unchanged: POST /v1/embeddings runs the task once per input — each
// through the path an infer request takes (admission, engine slots or the
// batcher, which groups them) — and answers the embeddings, as floats or
// base64 (little-endian float32, the SDKs' default); GET /v1/models lists
// the families that have such a task. The key is the bearer token, as for
// every endpoint. Errors have OpenAI's shape: {"error": {"message",
// "type", "param", "code"}}.

// maxOpenAIInputs bounds the inputs of one embeddings request (OpenAI's
// own limit is 2048).
const maxOpenAIInputs = 2048

// openAITask returns m's task served as OpenAI embeddings, nil for none.
func (m *model) openAITask() *spec.InferenceTaskProfile {
	for i := range m.oip.Spec.Tasks {
		if t := &m.oip.Spec.Tasks[i]; t.OpenAI != nil && len(t.OpenAIProblems()) == 0 {
			return t
		}
	}
	return nil
}

// openAIModels answers GET /v1/models: the families with an embeddings
// task.
func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, m := range s.cat().order {
		if m.openAITask() == nil || checkModel(r.Context(), m.oip.Spec.ModelFamilyID) != nil {
			continue
		}
		out.Data = append(out.Data, entry{ID: m.oip.Spec.ModelFamilyID, Object: "model", OwnedBy: s.cfg.Name})
	}
	writeJSON(w, http.StatusOK, out)
}

// openAIEmbeddingRequest is the body of POST /v1/embeddings.
type openAIEmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// openAIInput is one input: text, or token ids.
type openAIInput struct {
	text   *string
	tokens []int64
}

// parseOpenAIInputs reads input: a string, a list of strings, a list of
// token ids, or a list of lists of token ids.
func parseOpenAIInputs(raw json.RawMessage) ([]openAIInput, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("input is missing")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []openAIInput{{text: &one}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		out := make([]openAIInput, len(texts))
		for i := range texts {
			out[i] = openAIInput{text: &texts[i]}
		}
		return out, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return []openAIInput{{tokens: ids}}, nil
	}
	var lists [][]int64
	if err := json.Unmarshal(raw, &lists); err == nil {
		out := make([]openAIInput, len(lists))
		for i := range lists {
			out[i] = openAIInput{tokens: lists[i]}
		}
		return out, nil
	}
	return nil, errors.New("input must be a string, a list of strings, a list of token ids or a list of lists of token ids")
}

// openAIEmbeddings answers POST /v1/embeddings.
func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	a, err := s.arrive(false)
	if err != nil {
		refuse(w, r, err)
		return
	}
	defer a.done()
	ctx := r.Context()
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, arrivedAt(r).Add(s.cfg.Timeout))
		defer cancel()
	}
	rc := http.NewResponseController(w)
	body, err := s.readBody(w, r, rc, &a.hold)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	var req openAIEmbeddingRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeOpenAIError(w, withStatus(http.StatusBadRequest, "malformed request body: %v", err))
		return
	}
	m, _, err := s.lookup(ctx, req.Model, "")
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	task := m.openAITask()
	if task == nil {
		writeOpenAIError(w, withStatus(http.StatusNotFound, "model %q has no embeddings task (a task with openai: in its manifest)", req.Model))
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeOpenAIError(w, withStatus(http.StatusBadRequest, "encoding_format %q: want float or base64", req.EncodingFormat))
		return
	}
	inputs, err := parseOpenAIInputs(req.Input)
	if err == nil && (len(inputs) == 0 || len(inputs) > maxOpenAIInputs) {
		err = fmt.Errorf("%d inputs: want 1 to %d", len(inputs), maxOpenAIInputs)
	}
	if err != nil {
		writeOpenAIError(w, withStatus(http.StatusBadRequest, "%v", err))
		return
	}
	field, text, _ := task.OpenAIInput()
	artifact := task.OpenAIArtifact()
	reqs := make([]*oip.InferenceRequest, len(inputs))
	usage := 0
	for i, in := range inputs {
		t := oip.Tensor{Name: field.FieldID}
		switch {
		case text && in.text != nil:
			b, _ := json.Marshal([]string{*in.text})
			t.Datatype, t.Shape, t.Data = "BYTES", []int64{1}, b
			usage += len(strings.Fields(*in.text))
		case !text && in.tokens != nil:
			if len(in.tokens) == 0 {
				writeOpenAIError(w, withStatus(http.StatusBadRequest, "input %d is an empty list of token ids", i))
				return
			}
			b, _ := json.Marshal(in.tokens)
			t.Datatype, t.Shape, t.Data = "INT64", []int64{int64(len(in.tokens))}, b
			usage += len(in.tokens)
		case text:
			writeOpenAIError(w, withStatus(http.StatusBadRequest, "model %q takes text: send input as a string or a list of strings", req.Model))
			return
		default:
			writeOpenAIError(w, withStatus(http.StatusBadRequest, "model %q takes token ids: send input as a list of token ids or a list of them", req.Model))
			return
		}
		reqs[i] = &oip.InferenceRequest{Inputs: []oip.Tensor{t}, Parameters: oip.Parameters{"task": task.TaskID}}
	}
	// Every input runs as an infer request would, all at once: under
	// -batch the batcher groups them.
	vecs := make([][]float32, len(inputs))
	errs := make([]error, len(inputs))
	var wg sync.WaitGroup
	holds := make([]*holding, len(reqs)) // one each: they run at once
	defer func() {
		for _, h := range holds {
			h.done()
		}
	}()
	calls := make([]*inferCall, len(reqs))
	ctxs := make([]context.Context, len(reqs))
	for i := range reqs {
		// Each input has a request info of its own (its queue wait, its
		// spans): they run at once. The request's own counts as one
		// infer request of the task.
		ctxs[i] = context.WithValue(ctx, infoKey{}, &reqInfo{arrived: arrivedAt(r), key: keyOf(ctx)})
		holds[i] = &holding{a: &s.adm}
		if calls[i], err = s.resolve(ctxs[i], m, nil, reqs[i], false, holds[i]); err != nil {
			writeOpenAIError(w, fmt.Errorf("input %d: %w", i, err))
			return
		}
	}
	setObs(ctx, s.tel.obs(m, task.TaskID))
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := s.execute(ctxs[i], c)
			if err != nil {
				errs[i] = err
				return
			}
			emb, ok := out[artifact].(*tensor.Tensor)
			if !ok || emb.DType != tensor.Float32 {
				errs[i] = fmt.Errorf("artifact %q is not a float32 tensor", artifact)
				return
			}
			vecs[i], errs[i] = emb.Float32s()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			if ctx.Err() != nil && r.Context().Err() == nil {
				err = s.deadlinePassed(ctx)
			}
			writeOpenAIError(w, fmt.Errorf("input %d: %w", i, err))
			return
		}
	}
	if req.Dimensions != nil && *req.Dimensions != len(vecs[0]) {
		writeOpenAIError(w, withStatus(http.StatusBadRequest, "dimensions %d: model %q answers %d", *req.Dimensions, req.Model, len(vecs[0])))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(appendOpenAIEmbeddings(nil, req.Model, vecs, req.EncodingFormat == "base64", usage))
}

// appendOpenAIEmbeddings appends the answer's JSON: floats as the shortest
// decimal that reads back to the same float32, or base64 of their
// little-endian bytes.
func appendOpenAIEmbeddings(b []byte, model string, vecs [][]float32, b64 bool, tokens int) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range vecs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			raw := make([]byte, 4*len(v))
			for k, f := range v {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(f))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for k, f := range v {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	mb, _ := json.Marshal(model)
	b = append(b, mb...)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, "}}"...)
}

// writeOpenAIError writes err as OpenAI's error body, with the status
// wfserve gives it (Retry-After for 429 and 503, as writeError does).
func writeOpenAIError(w http.ResponseWriter, err error) {
	code, msg := errorAnswer(w, err)
	kind := "invalid_request_error"
	switch {
	case code == http.StatusUnauthorized:
		kind = "authentication_error"
	case code == http.StatusForbidden:
		kind = "permission_error"
	case code == http.StatusNotFound:
		kind = "not_found_error"
	case code == http.StatusTooManyRequests:
		kind = "rate_limit_error"
	case code >= 500:
		kind = "server_error"
	}
	if rec, ok := w.(*recorder); ok {
		rec.err = msg
	}
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	writeJSON(w, code, map[string]body{"error": {Message: msg, Type: kind}})
}
