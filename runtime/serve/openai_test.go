package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// openAIEmbeddings is an embeddings answer.
type openAIEmbeddings struct {
	Object string `json:"object"`
	Data   []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// inProcessEmbedding is the tiny encoder's embedding of tokens, in
// process.
func inProcessEmbedding(t *testing.T, tokens ...int64) []float32 {
	t.Helper()
	out, err := inProcess(t, "tiny-encoder").Run(context.Background(), "embed", map[string]any{"tokens": tensor.FromInt64(tokens, int64(len(tokens)))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := out["embedding"].(*tensor.Tensor).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// POST /v1/embeddings answers OpenAI's shape with the in-process
// embeddings, bit for bit, as floats and as base64; GET /v1/models lists
// the families with an openai task; mistakes are OpenAI-shaped errors.
func TestOpenAIEmbeddings(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Batching: true})
	want := [][]float32{inProcessEmbedding(t, 1, 2, 3, 4), inProcessEmbedding(t, 5, 6, 7)}
	for _, format := range []string{"float", "base64"} {
		code, _, b := post(t, s.url+"/v1/embeddings", `{"model":"tiny-encoder","input":[[1,2,3,4],[5,6,7]],"encoding_format":"`+format+`"}`, "Content-Type", "application/json")
		var got openAIEmbeddings
		if err := json.Unmarshal(b, &got); code != 200 || err != nil || got.Object != "list" || got.Model != "tiny-encoder" || len(got.Data) != 2 || got.Usage.PromptTokens != 7 {
			t.Fatalf("%s: %d %s (%v)", format, code, b, err)
		}
		for i, d := range got.Data {
			var v []float32
			if format == "float" {
				if err := json.Unmarshal(d.Embedding, &v); err != nil {
					t.Fatal(err)
				}
			} else {
				var enc string
				json.Unmarshal(d.Embedding, &enc)
				raw, err := base64.StdEncoding.DecodeString(enc)
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k+4 <= len(raw); k += 4 {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[k:])))
				}
			}
			if d.Index != i || !sameBits(v, want[i]) {
				t.Errorf("%s: embedding %d differs from the in-process one", format, i)
			}
		}
	}
	code, _, b := call(t, "GET", s.url+"/v1/models", "")
	if code != 200 || !strings.Contains(string(b), `"id":"tiny-encoder"`) || strings.Contains(string(b), "tiny-world") {
		t.Errorf("models: %d %s", code, b)
	}
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"model":"tiny-encoder","input":"some text"}`, 400, "takes token ids"},
		{`{"model":"tiny-world","input":[[1]]}`, 404, "has no embeddings task"},
		{`{"model":"nope","input":[[1]]}`, 404, "no model"},
		{`{"model":"tiny-encoder","input":[[]]}`, 400, "empty list of token ids"},
		{`{"model":"tiny-encoder","input":{"a":1}}`, 400, "input must be"},
		{`{"model":"tiny-encoder","input":[[1]],"encoding_format":"hex"}`, 400, "encoding_format"},
		{`{"model":"tiny-encoder","input":[[1]],"dimensions":3}`, 400, "dimensions 3"},
	} {
		code, _, b := post(t, s.url+"/v1/embeddings", c.body, "Content-Type", "application/json")
		var e struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if json.Unmarshal(b, &e); code != c.code || !strings.Contains(e.Error.Message, c.want) || e.Error.Type == "" {
			t.Errorf("%s: %d %s, want %d %q", c.body, code, b, c.code, c.want)
		}
	}
}

// The openai package from npm (the official Node SDK, as users run it)
// lists the models and gets embeddings from wfserve unchanged — with a
// key, through its default base64 encoding — bit for bit the in-process
// ones.
func TestOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	modules := openAISDK(t)
	const key = "sk-wfserve-test-0123456789"
	s := start(t, serve.Config{Token: key})
	script := `
const OpenAI = require('openai');
const client = new OpenAI({apiKey: process.env.KEY, baseURL: process.env.BASE + '/v1', maxRetries: 0});
(async () => {
  const models = await client.models.list();
  const r = await client.embeddings.create({model: 'tiny-encoder', input: [[1, 2, 3, 4], [5, 6, 7]]});
  let refused = '';
  try { await new OpenAI({apiKey: 'wrong', baseURL: process.env.BASE + '/v1', maxRetries: 0}).embeddings.create({model: 'tiny-encoder', input: [[1]]}); }
  catch (e) { refused = String(e.status); }
  console.log(JSON.stringify({models: models.data.map(m => m.id), emb: r.data.map(d => Array.from(d.embedding)), refused}));
})().catch(e => { console.error(e); process.exit(1); });
`
	cmd := exec.Command("node", "-e", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "KEY="+key, "BASE="+s.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Models  []string    `json:"models"`
		Emb     [][]float64 `json:"emb"`
		Refused string      `json:"refused"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node's output %s: %v", out, err)
	}
	if len(got.Models) != 1 || got.Models[0] != "tiny-encoder" || got.Refused != "401" || len(got.Emb) != 2 {
		t.Fatalf("node's output: %s", out)
	}
	for i, w := range [][]float32{inProcessEmbedding(t, 1, 2, 3, 4), inProcessEmbedding(t, 5, 6, 7)} {
		v := make([]float32, len(got.Emb[i]))
		for k, x := range got.Emb[i] {
			v[k] = float32(x)
		}
		if !sameBits(v, w) {
			t.Errorf("the SDK's embedding %d differs from the in-process one", i)
		}
	}
}

// openAIVersion is the openai npm package the test runs: its 4.x line
// supports this machine's Node 20 (5.x and later want Node 22).
const openAIVersion = "4.95.0"

// openAISDK installs the openai npm package once per machine (in the user
// cache) and returns its node_modules folder.
func openAISDK(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "wfgen", "npm-openai-"+openAIVersion)
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "openai", "package.json")); err == nil {
		return modules
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".npm-openai-*")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".npm-openai-*"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "--silent", "openai@"+openAIVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install openai@%s: %v\n%s", openAIVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another test binary installed it meanwhile: use that one.
		if _, serr := os.Stat(filepath.Join(modules, "openai", "package.json")); serr != nil {
			t.Fatal(err)
		}
	}
	return modules
}
