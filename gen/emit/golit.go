package emit

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/manifest"
)

// literal renders v as a Go expression whose value, when assigned to a
// variable of v's static type, equals v exactly (as go-cmp sees it): the
// dynamic type of interface values is kept, nil and empty slices and maps
// stay distinct, map entries are sorted, and zero struct fields are left
// out. Pointers to scalars use new(value) (Go 1.26).
type literal struct{}

// maxLiteralDepth bounds the nesting of values rendered as literals: deep
// enough for any manifest the loader accepts (a mapping or list level of the
// manifest is two levels of literal: the container and its interface value).
const maxLiteralDepth = 4 * manifest.MaxDepth

// expr renders v for a context whose static type is v.Type().
func (l *literal) expr(v reflect.Value, depth int) (jen.Code, error) {
	return l.value(v, depth, false)
}

// composite reports whether values of t render as composite literals.
func composite(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
		return true
	case reflect.Pointer:
		return t.Elem().Kind() == reflect.Struct
	}
	return false
}

// value renders v; elide says v is an element of a composite literal, so
// its own composite type (and the & of a struct pointer) is left out, as
// gofmt -s would.
func (l *literal) value(v reflect.Value, depth int, elide bool) (jen.Code, error) {
	typ := func(t reflect.Type) *jen.Statement {
		if elide {
			return jen.Null()
		}
		return typeCode(t)
	}
	if depth > maxLiteralDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxLiteralDepth)
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		return l.dynamic(v.Elem(), depth+1)
	case reflect.Pointer:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		e := v.Elem()
		if e.Kind() == reflect.Struct {
			c, err := l.value(e, depth+1, elide)
			if err != nil {
				return nil, err
			}
			if elide {
				return c, nil
			}
			return jen.Op("&").Add(c), nil
		}
		c, err := l.dynamic(e, depth+1)
		if err != nil {
			return nil, err
		}
		return jen.New(c), nil
	case reflect.Struct:
		t := v.Type()
		var fields []jen.Code
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fv := v.Field(i)
			if fv.IsZero() {
				continue
			}
			if !f.IsExported() {
				return nil, fmt.Errorf("%s has an unexported field %s that a literal cannot set", t, f.Name)
			}
			if c := constant(fv, t, f.Name); c != nil {
				fields = append(fields, jen.Line().Id(f.Name).Op(":").Add(c))
				continue
			}
			c, err := l.expr(fv, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			fields = append(fields, jen.Line().Id(f.Name).Op(":").Add(c))
		}
		if len(fields) > 0 {
			fields = append(fields, jen.Line())
		}
		return typ(t).Values(fields...), nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return jen.Nil(), nil
		}
		multiline := composite(v.Type().Elem()) && v.Len() > 0
		items := make([]jen.Code, 0, v.Len()+1)
		for i := 0; i < v.Len(); i++ {
			c, err := l.value(v.Index(i), depth+1, composite(v.Type().Elem()))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if multiline {
				c = jen.Line().Add(c)
			}
			items = append(items, c)
		}
		if multiline {
			items = append(items, jen.Line())
		}
		return typ(v.Type()).Values(items...), nil
	case reflect.Map:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		type entry struct {
			key  string
			k, e jen.Code
		}
		var entries []entry
		for _, k := range v.MapKeys() {
			kc, err := l.value(k, depth+1, composite(k.Type()))
			if err != nil {
				return nil, err
			}
			ec, err := l.value(v.MapIndex(k), depth+1, composite(v.Type().Elem()))
			if err != nil {
				return nil, fmt.Errorf("[%v]: %w", k, err)
			}
			entries = append(entries, entry{key: fmt.Sprintf("%#v", jen.Null().Add(kc)), k: kc, e: ec})
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
		items := make([]jen.Code, 0, len(entries)+1)
		for _, e := range entries {
			items = append(items, jen.Line().Add(e.k).Op(":").Add(e.e))
		}
		if len(items) > 0 {
			items = append(items, jen.Line())
		}
		return typ(v.Type()).Values(items...), nil
	}
	if c := constant(v, nil, ""); c != nil {
		return c, nil
	}
	return l.scalar(v, false)
}

// dynamic renders v for an interface context: scalars carry their exact
// type (int64(3), float64 as a float literal, named types converted).
func (l *literal) dynamic(v reflect.Value, depth int) (jen.Code, error) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
		return l.expr(v, depth)
	}
	return l.scalar(v, true)
}

// scalar renders a basic value. In an interface context (typed) the
// literal is converted to v's type unless the untyped constant already has
// it by default (bool, string, int, float64).
func (l *literal) scalar(v reflect.Value, typed bool) (jen.Code, error) {
	t := v.Type()
	var c jen.Code
	defaultType := false
	switch v.Kind() {
	case reflect.Bool:
		c, defaultType = jen.Lit(v.Bool()), true
	case reflect.String:
		c, defaultType = jen.Lit(v.String()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c, defaultType = jen.Op(strconv.FormatInt(v.Int(), 10)), v.Kind() == reflect.Int
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		c = jen.Op(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsInf(f, 1):
			return jen.Qual("math", "Inf").Call(jen.Lit(1)), nil
		case math.IsInf(f, -1):
			return jen.Qual("math", "Inf").Call(jen.Lit(-1)), nil
		case math.IsNaN(f):
			return jen.Qual("math", "NaN").Call(), nil
		}
		c, defaultType = jen.Op(floatLiteral(f, v.Kind() == reflect.Float32)), v.Kind() == reflect.Float64
	default:
		return nil, fmt.Errorf("cannot render a value of type %s as Go code", t)
	}
	if typed && (!defaultType || t.PkgPath() != "") {
		return typeCode(t).Call(c), nil
	}
	return c, nil
}

// floatLiteral formats f as an untyped floating-point constant (always with
// a '.' or an exponent, so that it defaults to float64), exact for its size.
func floatLiteral(f float64, is32 bool) string {
	bits := 64
	if is32 {
		bits = 32
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	for _, r := range s {
		if r == '.' || r == 'e' || r == 'E' {
			return s
		}
	}
	return s + ".0"
}

// typeCode renders a type.
func typeCode(t reflect.Type) *jen.Statement {
	if t.Name() != "" {
		if t.PkgPath() == "" {
			return jen.Id(t.Name())
		}
		return jen.Qual(t.PkgPath(), t.Name())
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jen.Op("*").Add(typeCode(t.Elem()))
	case reflect.Slice:
		return jen.Index().Add(typeCode(t.Elem()))
	case reflect.Array:
		return jen.Index(jen.Lit(t.Len())).Add(typeCode(t.Elem()))
	case reflect.Map:
		return jen.Map(typeCode(t.Key())).Add(typeCode(t.Elem()))
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return jen.Any()
		}
	}
	return jen.Id(t.String())
}
