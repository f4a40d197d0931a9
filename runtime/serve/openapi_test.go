package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// The served OpenAPI document says exactly what the server takes: requests
// derived from a valid one by changing one input's datatype or shape (and
// the batch parameter) are valid for the document's request schema when,
// and only when, the server answers 200 (else 400).
func TestOpenAPIRequestSchemasAgreeWithTheServer(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	_, _, doc := call(t, "GET", s.url+"/openapi.json", "")
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource("doc.json", bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	// data returns n elements of datatype dt as JSON.
	data := func(dt string, n int64) string {
		el := map[string]string{"BOOL": "true", "BYTES": `"x"`, "FP32": "1.5", "FP64": "1.5", "FP16": "1.5", "BF16": "1.5"}[dt]
		if el == "" {
			el = "1"
		}
		parts := make([]string, n)
		for i := range parts {
			parts[i] = el
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tensor := func(name, dt string, shape ...int64) string {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		sh, _ := json.Marshal(shape)
		return fmt.Sprintf(`{"name":%q,"datatype":%q,"shape":%s,"data":%s}`, name, dt, sh, data(dt, n))
	}
	type variantCase struct {
		model, schema, params string
		inputs                []string
	}
	var cases []variantCase
	datatypes := []string{"BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "UINT16", "FP16", "FP32", "FP64", "BF16", "BYTES"}
	shapes := [][]int64{{}, {0}, {1}, {5}, {2, 5}, {0, 5}, {2, 0}, {1, 2, 3}}
	for _, batch := range []string{`{}`, `{"batch":true}`} {
		for _, dt := range datatypes {
			for _, sh := range shapes {
				cases = append(cases, variantCase{"tiny-encoder", "tiny-encoder.embed.InferRequest", batch, []string{tensor("tokens", dt, sh...)}})
			}
		}
		for _, dt := range datatypes {
			for _, sh := range [][]int64{{}, {1}, {2}} {
				cases = append(cases, variantCase{"tiny-encoder", "tiny-encoder.embed.InferRequest", batch,
					[]string{tensor("tokens", "INT64", 2, 3), tensor("normalize", dt, sh...)}})
			}
		}
	}
	for _, dt := range datatypes {
		for _, sh := range [][]int64{{}, {1}, {2}} {
			cases = append(cases, variantCase{"tiny-world", "tiny-world.generate.InferRequest", `{}`,
				[]string{tensor("prompt", dt, sh...), tensor("num_frames", "INT64", 1)}})
			cases = append(cases, variantCase{"tiny-world", "tiny-world.generate.InferRequest", `{}`,
				[]string{tensor("prompt", "BYTES", 1), tensor("num_frames", dt, sh...)}})
		}
	}
	schemas := map[string]*jsonschema.Schema{}
	agree, valid := 0, 0
	for _, tc := range cases {
		sch := schemas[tc.schema]
		if sch == nil {
			var err error
			if sch, err = c.Compile("doc.json#/components/schemas/" + tc.schema); err != nil {
				t.Fatal(err)
			}
			schemas[tc.schema] = sch
		}
		body := `{"parameters":` + tc.params + `,"inputs":[` + strings.Join(tc.inputs, ",") + `]}`
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		schemaOK := sch.Validate(v) == nil
		code, _, b := call(t, "POST", s.url+"/v2/models/"+tc.model+"/infer", body)
		switch {
		case schemaOK && code != 200:
			t.Errorf("the document takes %s, the server answers %d: %.200s", body, code, b)
		case !schemaOK && code != 400:
			t.Errorf("the document refuses %s, the server answers %d: %.200s", body, code, b)
		default:
			agree++
			if schemaOK {
				valid++
			}
		}
	}
	t.Logf("%d requests, the document and the server agree on %d (%d valid)", len(cases), agree, valid)
	if valid == 0 || valid == agree {
		t.Errorf("the cases must hold valid and invalid requests (%d valid of %d)", valid, agree)
	}
}
