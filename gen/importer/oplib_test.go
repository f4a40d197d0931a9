package importer

import (
	"os"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// A checkpoint calling custom ops gets op_libraries: the library a Debian
// package installs for their namespace when it is here (torchvision's),
// else an empty list, a TODO and a warning naming the ops, the namespace
// and where to list the library.
func TestSkeletonCustomOps(t *testing.T) {
	t.Parallel()
	ck := checkpoint
	ck.CustomOps = []contract.CustomOp{{Namespace: "my_ops", Name: "fused"}, {Namespace: "my_ops", Name: "other"}}
	res, err := Skeleton(ck, schemas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("my-model.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v\n%s", diags, res.YAML)
	}
	if libs := f.Spec.OpLibraries; libs == nil || len(libs) != 0 {
		t.Errorf("op_libraries %#v, want an empty list to fill in", libs)
	}
	want := `the checkpoint calls the custom ops my_ops::fused, my_ops::other, and the load fails until the shared library that registers namespace "my_ops" is loaded: list it in op_libraries, or in ` + engine.EnvOpLibraries
	if !strings.Contains(strings.Join(res.Warnings, "\n"), want) {
		t.Errorf("no warning %q in %q", want, res.Warnings)
	}
	if !strings.Contains(string(res.YAML), "# TODO: "+want) {
		t.Errorf("no TODO %q in\n%s", want, res.YAML)
	}

	ck.CustomOps = []contract.CustomOp{{Namespace: "torchvision", Name: "nms"}}
	res, err = Skeleton(ck, schemas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags = validate.Bytes("my-model.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v\n%s", diags, res.YAML)
	}
	path, installed := engine.KnownOpLibrary("torchvision")
	switch {
	case installed && (len(f.Spec.OpLibraries) != 1 || f.Spec.OpLibraries[0] != path):
		t.Errorf("op_libraries %q, want [%s]", f.Spec.OpLibraries, path)
	case installed && strings.Contains(strings.Join(res.Warnings, "\n"), "torchvision"):
		t.Errorf("a warning about torchvision with the library found: %q", res.Warnings)
	case !installed && !strings.Contains(strings.Join(res.Warnings, "\n"), "apt-get install python3-torchvision"):
		t.Errorf("without python3-torchvision: no warning saying to install it in %q", res.Warnings)
	}
	if installed {
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	}
}
