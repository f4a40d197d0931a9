package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/schema"
)

// TestManifestDocs keeps docs/manifest.md honest: every key of the schema
// is documented, every YAML example parses, and the complete manifest
// examples validate.
func TestManifestDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "manifest.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	var s struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(schema.JSON, &s); err != nil {
		t.Fatal(err)
	}
	for def, d := range s.Defs {
		for key := range d.Properties {
			if !strings.Contains(doc, "| `"+key+"` |") {
				t.Errorf("key %s.%s has no row in docs/manifest.md", def, key)
			}
			if !strings.Contains(doc, key+":") && !strings.Contains(doc, `"`+key+`"`) {
				t.Errorf("key %s.%s has no example in docs/manifest.md", def, key)
			}
		}
	}
	blocks := 0
	for i, part := range strings.Split(doc, "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("yaml block %d is not closed", i)
		}
		if strings.Count(strings.TrimSpace(block), "\n") == 0 && strings.HasPrefix(strings.TrimSpace(block), "#") {
			continue // a lone comment line, such as the schema line
		}
		blocks++
		if _, errs := manifest.Parse("example.yaml", []byte(block)); len(errs) > 0 {
			t.Errorf("yaml block %d does not parse: %v\n%s", i, errs, block)
		}
		if strings.HasPrefix(block, "# yaml-language-server:") {
			if _, diags := Bytes("example.yaml", []byte(block)); len(diags) > 0 {
				t.Errorf("complete example %d is invalid: %v", i, diags)
			}
		}
	}
	if blocks < 10 {
		t.Errorf("only %d yaml examples", blocks)
	}
}
