package zoo

import (
	"fmt"
	"sort"
	"strings"
)

// A Model is one model of the program: its name (the folder of zoo.py's
// files) and the Go package generated for it.
type Model struct {
	Name, Package string
}

// Program returns the source of the Go program that loads each model
// through its generated package (module path mod, packages under
// mod/models) with the in-process client, runs forward on zoo.py's inputs
// and writes every tensor of the typed result as an .npy file. It runs as
//
//	prog MANIFESTS PYDIR OUTDIR [HTTP_URL GRPC_URL]
//
// and prints one JSON line per model and way of calling it: {"model",
// "transport", "result", "error"}; its files go to OUTDIR/TRANSPORT/MODEL.
// The transport is "in-process", and with the URLs of a wfserve serving the
// manifests also "rest-json", "rest-binary" and "grpc": the generated
// client over a remote client of package runtime/remote.
func Program(mod string, models []Model) string {
	ms := append([]Model(nil), models...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	var imports, table strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&imports, "\tm%d %q\n", i, mod+"/models/"+m.Package)
		fmt.Fprintf(&table, `	{%q, m%[2]d.Spec(), func(ctx context.Context, b client.Backend, manifests, in string) (any, error) {
		var c *m%[2]d.Client
		if b == nil {
			var err error
			if c, err = m%[2]d.New(client.WithManifestDir(manifests), client.WithDevice("cpu")); err != nil {
				return nil, err
			}
		} else {
			c = m%[2]d.NewClient(b)
		}
		defer c.Close()
		p := m%[2]d.DefaultForwardParams()
		if err := fill(&p, in); err != nil {
			return nil, err
		}
		return c.Forward(ctx, p)
	}},
`, m.Name, i)
	}
	return strings.Replace(strings.Replace(programSource, "\t//IMPORTS\n", imports.String(), 1), "\t//MODELS\n", table.String(), 1)
}

const programSource = `package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	//IMPORTS
)

type model struct {
	name string
	spec *spec.ModelInferenceSpec
	// run runs forward through the generated client: in-process when b is
	// nil, else over b.
	run func(ctx context.Context, b client.Backend, manifests, in string) (any, error)
}

var models = []model{
	//MODELS
}

// fill sets each tensor field of params p from in_<field id>.npy, a
// tensor list field from in_<field id>_<i>.npy, and each part of a dict
// or tuple field (a struct of tensors) from in_<field id>_<key>.npy or
// in_<field id>_<i>.npy; other fields keep their defaults.
func fill(p any, in string) error {
	v := reflect.ValueOf(p).Elem()
	for i := 0; i < v.NumField(); i++ {
		id := strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0]
		if x, err := read(filepath.Join(in, "in_"+id+".npy")); err != nil {
			return err
		} else if x != nil {
			v.Field(i).Set(reflect.ValueOf(x))
			continue
		}
		if st := v.Field(i).Type(); st.Kind() == reflect.Struct || st.Kind() == reflect.Pointer && st.Elem().Kind() == reflect.Struct {
			s := reflect.New(st).Elem()
			if st.Kind() == reflect.Pointer {
				s = reflect.New(st.Elem()).Elem()
			}
			set := false
			for k := 0; k < s.NumField(); k++ {
				for _, part := range []string{s.Type().Field(k).Tag.Get("json"), strconv.Itoa(k)} {
					x, err := read(filepath.Join(in, "in_"+id+"_"+part+".npy"))
					if err != nil {
						return err
					}
					if x != nil {
						s.Field(k).Set(reflect.ValueOf(x))
						set = true
						break
					}
				}
			}
			if set && st.Kind() == reflect.Pointer {
				v.Field(i).Set(s.Addr())
			} else if set {
				v.Field(i).Set(s)
			}
			continue
		}
		var list []*tensor.Tensor
		for j := 0; ; j++ {
			x, err := read(filepath.Join(in, "in_"+id+"_"+strconv.Itoa(j)+".npy"))
			if err != nil {
				return err
			}
			if x == nil {
				break
			}
			list = append(list, x)
		}
		if list != nil {
			v.Field(i).Set(reflect.ValueOf(list))
		}
	}
	return nil
}

func read(path string) (*tensor.Tensor, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return artifactio.ReadNPY(path)
}

// write walks the typed result: artifact i of the task is field i of the
// result; its path component is its tuple position, else i when the model
// returns a tuple (whose leaves are the artifacts in order), else its id; a
// record's fields are named by the manifest's field names, list items by
// their index. It returns a summary of the result's Go types, and of which
// artifacts the manifest says may be missing.
func write(s *spec.ModelInferenceSpec, res any, tuple bool, out string) (string, error) {
	task := s.Tasks[0]
	v := reflect.ValueOf(res).Elem()
	if v.NumField() != len(task.Outputs) {
		return "", fmt.Errorf("result %s has %d fields, the task %d artifacts", v.Type(), v.NumField(), len(task.Outputs))
	}
	var summary []string
	for i, a := range task.Outputs {
		comp := a.ArtifactID
		switch {
		case a.Position != nil:
			comp = strconv.Itoa(*a.Position)
		case tuple:
			comp = strconv.Itoa(i)
		}
		var names []string
		for _, f := range a.Fields {
			names = append(names, f.Name)
		}
		if err := walk(v.Field(i), "out."+comp, names, out); err != nil {
			return "", err
		}
		d := v.Type().Field(i).Name + " " + describe(v.Field(i))
		if !a.Required {
			d += " (optional: nil when the model returns none)"
		}
		summary = append(summary, d)
	}
	return strings.Join(summary, ", "), nil
}

func walk(v reflect.Value, path string, fields []string, out string) error {
	if x, ok := v.Interface().(*tensor.Tensor); ok {
		if x == nil {
			return nil
		}
		return artifactio.WriteNPY(filepath.Join(out, path+".npy"), x)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return walk(v.Elem(), path, fields, out)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if err := walk(v.Index(i), path+"."+strconv.Itoa(i), fields, out); err != nil {
				return err
			}
		}
		return nil
	case reflect.Struct:
		if v.NumField() != len(fields) {
			return fmt.Errorf("%s: %s has %d fields, the manifest %d", path, v.Type(), v.NumField(), len(fields))
		}
		for i := 0; i < v.NumField(); i++ {
			if err := walk(v.Field(i), path+"."+fields[i], nil, out); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: %s is not a tensor, a pointer, a slice or a struct", path, v.Type())
}

// describe summarises a result field: "Tensor float32[1 1000]", "[]Tensor ×12",
// "[]ForwardOutput1{Boxes Scores Labels} ×2 (Boxes [300 4], [300 4])".
func describe(v reflect.Value) string {
	if x, ok := v.Interface().(*tensor.Tensor); ok {
		if x == nil {
			return "Tensor (nil)"
		}
		return fmt.Sprintf("Tensor %s%v", x.DType, x.Shape)
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Slice:
		s := fmt.Sprintf("[]%s ×%d", typeName(t.Elem()), v.Len())
		if t.Elem().Kind() == reflect.Struct && t.Elem().NumField() > 0 {
			// the first field's shape in each item (a detector's boxes)
			var shapes []string
			for i := 0; i < v.Len(); i++ {
				if x, ok := v.Index(i).Field(0).Interface().(*tensor.Tensor); ok && x != nil {
					shapes = append(shapes, fmt.Sprint(x.Shape))
				}
			}
			s += " (" + t.Elem().Field(0).Name + " " + strings.Join(shapes, ", ") + ")"
		}
		return s
	case reflect.Pointer:
		s := "*" + typeName(t.Elem())
		if v.IsNil() {
			return s + " (nil)"
		}
		set := 0
		for i := 0; i < v.Elem().NumField(); i++ {
			if !v.Elem().Field(i).IsZero() {
				set++
			}
		}
		return fmt.Sprintf("%s (%d of %d set)", s, set, v.Elem().NumField())
	}
	return t.String()
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(&tensor.Tensor{}) {
		return "Tensor"
	}
	if t.Kind() == reflect.Struct {
		var fs []string
		for i := 0; i < t.NumField(); i++ {
			fs = append(fs, t.Field(i).Name)
		}
		return t.Name() + "{" + strings.Join(fs, " ") + "}"
	}
	return t.String()
}

func main() {
	manifests, py, out := os.Args[1], os.Args[2], os.Args[3]
	transports := []string{"in-process"}
	urls := map[string]string{}
	if len(os.Args) == 6 {
		transports = append(transports, "rest-json", "rest-binary", "grpc")
		urls = map[string]string{"rest-json": os.Args[4], "rest-binary": os.Args[4], "grpc": os.Args[5]}
	}
	enc := json.NewEncoder(os.Stdout)
	for _, m := range models {
		for _, tr := range transports {
			line := map[string]string{"model": m.name, "transport": tr}
			err := func() error {
				var b client.Backend
				if tr != "in-process" {
					var opts []remote.Option
					if tr == "rest-json" {
						opts = append(opts, remote.WithJSONTensors())
					}
					r, err := remote.New(m.spec, urls[tr], opts...)
					if err != nil {
						return err
					}
					b = r
				}
				res, err := m.run(context.Background(), b, manifests, filepath.Join(py, m.name))
				if err != nil {
					return err
				}
				dir := filepath.Join(out, tr, m.name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				root, err := os.ReadFile(filepath.Join(py, m.name, "root.txt"))
				if err != nil {
					return err
				}
				line["result"], err = write(m.spec, res, strings.TrimSpace(string(root)) == "tuple", dir)
				return err
			}()
			if err != nil {
				line["error"] = err.Error()
			}
			enc.Encode(line)
		}
	}
}
`
