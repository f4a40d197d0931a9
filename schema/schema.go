// Package schema holds the JSON Schema of wfgen manifests.
//
// The schema is generated from the Go manifest types (manifest.Document and
// the runtime spec types it embeds) with invopop/jsonschema; descriptions
// come from the types' doc comments, which are kept in comments.go so that
// generation does not need the source tree. manifest.schema.json is the
// checked-in copy, embedded as JSON; a test fails when it differs from what
// Generate returns. Regenerate both with:
//
//	go test ./schema -run TestGenerated -update
//
// or the schema alone with "go run ./cmd/wfgen schema > schema/manifest.schema.json".
package schema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/worldfoundry/wfgen/gen/manifest"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// ID is the schema's $id.
const ID = "https://github.com/worldfoundry/wfgen/schema/manifest.schema.json"

// JSON is the checked-in manifest.schema.json.
//
//go:embed manifest.schema.json
var JSON []byte

// Generate returns the manifest schema generated from the Go types, as
// indented JSON with a final newline. The output is deterministic.
func Generate() ([]byte, error) {
	return generate(goComments)
}

// generate reflects manifest.Document with the given doc comment map.
func generate(comments map[string]string) ([]byte, error) {
	r := &jsonschema.Reflector{
		// A spec.Number is a number kept as written; a kind is one of the
		// kind table's (spec.FieldKinds, spec.ArtifactKinds).
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			switch t {
			case reflect.TypeFor[spec.Kind]():
				return enum(spec.FieldKinds)
			case reflect.TypeFor[spec.ArtifactKind]():
				return enum(spec.ArtifactKinds)
			case reflect.TypeFor[spec.Number]():
				return &jsonschema.Schema{Type: "number"}
			case reflect.TypeFor[spec.Dim]():
				// A fixed size, a named dimension or "*".
				return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
					{Type: "integer", Minimum: json.Number("0")},
					{Type: "string", Pattern: `^([A-Za-z_][A-Za-z0-9_]*|\*)$`},
				}}
			}
			return nil
		},
		RequiredFromJSONSchemaTags: true,
		Anonymous:                  true,
		LookupComment: func(t reflect.Type, field string) string {
			return description(comments, t, field)
		},
	}
	s := r.Reflect(&manifest.Document{})
	s.ID = ID
	s.Title = "wfgen model family manifest"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal schema: %w", err)
	}
	return append(b, '\n'), nil
}

// enum is the schema of a string that is one of values.
func enum[S ~string](values []S) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, v := range values {
		s.Enum = append(s.Enum, string(v))
	}
	return s
}

// description returns the doc comment of type t (field "") or of one of its
// fields, in manifest terms: every Go field name of the manifest types
// that the comment mentions ("FieldID is ...", "(value - Remainder)") is
// written as its manifest key ("field_id is ...", "(value - remainder)").
func description(comments map[string]string, t reflect.Type, field string) string {
	key := t.PkgPath() + "." + t.Name()
	if field == "" {
		return manifestTerms(comments[key])
	}
	return manifestTerms(comments[key+"."+field])
}

// goKeys maps the Go field names of the manifest types to their manifest
// keys (names that are the same in both are left out).
var goKeys = func() map[string]string {
	m := map[string]string{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && !f.Anonymous && name != "" && name != "-" && name != f.Name {
				m[f.Name] = name
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(manifest.Document{}))
	return m
}()

// goWord matches an identifier-like word.
var goWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// manifestTerms writes the Go field names in a comment as manifest keys:
// the comment's first word when it is one ("Label is ...", "Deprecated,
// when ..."), and any other mixed-case Go name (ModelFamilyID,
// MultipleOf); single-capital words inside a sentence stay, since they are
// as likely English ("JSON Schema").
func manifestTerms(c string) string {
	first := true
	return goWord.ReplaceAllStringFunc(c, func(w string) string {
		isFirst := first
		first = false
		k, ok := goKeys[w]
		if !ok {
			return w
		}
		if isFirst && strings.HasPrefix(c, w) || strings.ContainsAny(w[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			return k
		}
		return w
	})
}

// CommentKeys returns the comment-map keys (types and their exported
// fields) of every named struct type the manifest schema is generated from,
// sorted. It is what comments.go must cover.
func CommentKeys() []string {
	seen := map[reflect.Type]bool{}
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.Name() == "" || seen[t] {
			return
		}
		seen[t] = true
		base := t.PkgPath() + "." + t.Name()
		keys = append(keys, base)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if !f.Anonymous {
				keys = append(keys, base+"."+f.Name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(manifest.Document{}))
	sort.Strings(keys)
	return keys
}
