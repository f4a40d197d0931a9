package spec

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestKindTablesFilled checks that every row of the base, kind and
// artifact kind tables fills every column: no column holds its zero value
// (a column that does not apply to a kind has a value saying so, as
// NotPicture does). A kind added with a column left out, or a column added
// without a value for every kind, fails here.
func TestKindTablesFilled(t *testing.T) {
	for _, table := range []struct {
		name string
		rows any
	}{
		{"base", baseTable},
		{"kind", kindTable},
		{"artifact kind", artifactTable},
	} {
		rows := reflect.ValueOf(table.rows)
		if rows.Len() == 0 {
			t.Errorf("the %s table is empty", table.name)
		}
		for i := range rows.Len() {
			row := rows.Index(i)
			for j := range row.NumField() {
				col := row.Field(j)
				if col.IsZero() || (col.Kind() == reflect.Slice && col.Len() == 0) {
					t.Errorf("%s table, row %d (%v): column %s is empty", table.name, i, row.Field(0), row.Type().Field(j).Name)
				}
			}
		}
	}
}

// kindConsts returns the constants of type typ that kind.go declares, by
// name, with their values.
func kindConsts(t *testing.T, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "kind.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("constant %s is not a string literal", n.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("kind.go declares no constant of type %s", typ)
	}
	return out
}

// TestKindConstantsHaveRows checks that every kind constant has exactly
// one row, whose Const column is the constant's name, and every row a
// constant: a kind declared without its row fails here.
func TestKindConstantsHaveRows(t *testing.T) {
	check := func(typ string, rows map[string]string) {
		consts := kindConsts(t, typ)
		if len(rows) != len(consts) {
			t.Errorf("%d %s rows for %d constants", len(rows), typ, len(consts))
		}
		for name, value := range consts {
			if rows[value] != name {
				t.Errorf("constant %s = %q: the row of %q has Const %q", name, value, value, rows[value])
			}
		}
	}
	kinds := map[string]string{}
	for _, r := range kindTable {
		kinds[string(r.Kind)] = r.Const
	}
	check("Kind", kinds)
	artifacts := map[string]string{}
	for _, r := range artifactTable {
		artifacts[string(r.Kind)] = r.Const
	}
	check("ArtifactKind", artifacts)
	for i, r := range baseTable {
		if r.Base != Base(i+1) {
			t.Errorf("base table row %d is base %d; the rows go in Base order", i, r.Base)
		}
	}
}

// TestKindRowsAgree checks what the rows say about each other: an item
// kind is a kind of single values of the same base, a base's kind is a
// single value of that base, and a picture artifact holds a tensor and
// has a field kind of its picture.
func TestKindRowsAgree(t *testing.T) {
	for _, r := range kindTable {
		k := r.Kind
		elem, ok := r.Elem.Info()
		switch {
		case !ok:
			t.Errorf("%s: item kind %q has no row", k, r.Elem)
		case elem.Elem != elem.Kind:
			t.Errorf("%s: item kind %s is a list", k, r.Elem)
		case elem.Base != r.Base:
			t.Errorf("%s: base %s, its item kind's %s", k, r.Base, elem.Base)
		case k.IsList() && r.Picture != NotPicture:
			t.Errorf("%s: a list of pictures", k)
		}
		if _, ok := r.Base.Info(); !ok {
			t.Errorf("%s: base %d has no row", k, r.Base)
		}
		if !strings.HasPrefix(r.Phrase, "a ") && !strings.HasPrefix(r.Phrase, "an ") {
			t.Errorf("%s: phrase %q is not \"a ...\"", k, r.Phrase)
		}
		if want := r.Base.String(); k.TensorLike() != (want == "tensor") {
			t.Errorf("%s: TensorLike %v with base %s", k, k.TensorLike(), want)
		}
	}
	for _, b := range Bases {
		info, _ := b.Info()
		k, ok := info.Kind.Info()
		if !ok || k.Base != b || k.Elem != k.Kind || k.Picture != NotPicture {
			t.Errorf("base %s: kind %s is not a plain single value of the base (%+v)", b, info.Kind, k)
		}
		if info.Kind.GoType() != info.Go || info.Kind.TorchScriptType() != info.TorchScript {
			t.Errorf("base %s: its kind's Go type %v and TorchScript type %q are not the base's", b, info.Kind.GoType(), info.Kind.TorchScriptType())
		}
		if !slices.Contains([]string{"string", "integer", "number", "boolean", "array"}, info.JSONType) {
			t.Errorf("base %s: JSON type %q", b, info.JSONType)
		}
	}
	for _, r := range artifactTable {
		if !r.Kind.IsPicture() {
			continue
		}
		fk, ok := r.Kind.FieldKind()
		if r.Holds != HoldsTensor || !ok || fk.Picture() != r.Picture {
			t.Errorf("artifact kind %s: a picture holding %d, field kind %q", r.Kind, r.Holds, fk)
		}
	}
}

// TestKindAnswers pins what the rows answer for every kind.
func TestKindAnswers(t *testing.T) {
	for _, c := range []struct {
		k                    Kind
		list, tensor, stack  bool
		ts, goType, phrase   string
		picture              Picture
		allowsLen, allowsImg bool
	}{
		{KindString, false, false, false, "str", "string", "a string", NotPicture, true, false},
		{"", false, false, false, "str", "string", "a string", NotPicture, true, false},
		{KindInt, false, false, false, "int", "int64", "an int", NotPicture, false, false},
		{KindFloat, false, false, false, "float", "float64", "a float", NotPicture, false, false},
		{KindBool, false, false, false, "bool", "bool", "a bool", NotPicture, false, false},
		{KindTensor, false, true, true, "Tensor", "*tensor.Tensor", "a tensor", NotPicture, false, false},
		{KindImage, false, true, true, "Tensor", "*tensor.Tensor", "an image", PictureImage, false, true},
		{KindVideo, false, true, true, "Tensor", "*tensor.Tensor", "a video", PictureVideo, false, true},
		{KindStringList, true, false, false, "List[str]", "[]string", "a list of strings", NotPicture, true, false},
		{KindIntList, true, false, false, "List[int]", "[]int64", "a list of ints", NotPicture, true, false},
		{KindFloatList, true, false, false, "List[float]", "[]float64", "a list of floats", NotPicture, true, false},
		{KindBoolList, true, false, false, "List[bool]", "[]bool", "a list of bools", NotPicture, true, false},
		{KindTensorList, true, true, false, "List[Tensor]", "[]*tensor.Tensor", "a list of tensors", NotPicture, true, false},
	} {
		k := c.k
		if k.IsList() != c.list || k.TensorLike() != c.tensor || k.Stacked() != c.stack || k.TorchScriptType() != c.ts ||
			k.GoType().String() != c.goType || k.Phrase() != c.phrase || k.Picture() != c.picture ||
			k.Allows(ConstraintMinLength) != c.allowsLen || k.Allows(ConstraintImage) != c.allowsImg {
			t.Errorf("%q: list %v tensor %v stacked %v ts %q go %v phrase %q picture %d len %v image %v", k, k.IsList(), k.TensorLike(), k.Stacked(),
				k.TorchScriptType(), k.GoType(), k.Phrase(), k.Picture(), k.Allows(ConstraintMinLength), k.Allows(ConstraintImage))
		}
		if l, ok := k.Elem().ListOf(); k.IsList() && (!ok || l != k) {
			t.Errorf("%q: ListOf(%s) = %q, %v", k, k.Elem(), l, ok)
		}
	}
	bad := Kind("matrix")
	if bad.Valid() || bad.IsList() || bad.Elem() != bad || bad.Base() != 0 || bad.Phrase() != "a matrix" || bad.TorchScriptType() != "" || bad.GoType() != nil {
		t.Errorf("a kind without a row answers as one")
	}
	for _, c := range Constraints {
		if bad.Allows(c) {
			t.Errorf("a kind without a row allows %s", c)
		}
	}
	if _, ok := KindImage.ListOf(); ok {
		t.Errorf("image has a list kind")
	}
	// Types, not their names: json.RawMessage is an alias of
	// jsontext.Value from Go 1.27 on, which reflect names.
	for k, want := range map[ArtifactKind]reflect.Type{
		ArtifactVideo: reflect.TypeFor[*tensor.Video](), ArtifactImage: reflect.TypeFor[*tensor.Image](), ArtifactEmbedding: reflect.TypeFor[*tensor.Embedding](),
		ArtifactTensor: reflect.TypeFor[*tensor.Tensor](), ArtifactText: reflect.TypeFor[string](), ArtifactJSON: reflect.TypeFor[json.RawMessage](),
		ArtifactTensorList: reflect.TypeFor[[]*tensor.Tensor](),
		// A record kind's struct is generated: Go is the type of its fields.
		ArtifactRecord: reflect.TypeFor[*tensor.Tensor](), ArtifactRecordList: reflect.TypeFor[*tensor.Tensor](),
	} {
		if info, _ := k.Info(); info.Go != want {
			t.Errorf("artifact kind %s: Go type %v, want %v", k, info.Go, want)
		}
	}
	if ArtifactKind("audio").TensorLike() || ArtifactKind("audio").IsPicture() || ArtifactKind("audio").Valid() {
		t.Errorf("an artifact kind without a row answers as one")
	}
}
