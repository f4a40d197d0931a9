package emit_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func loadGolden(t *testing.T, c string) []*ir.Family {
	t.Helper()
	files, diags, err := validate.Paths([]string{filepath.Join(goldenRoot, c, "input")})
	if err != nil || len(diags) > 0 {
		t.Fatal(err, diags)
	}
	return files
}

func TestGenerateCachedReusesOnlyVerifiedFiles(t *testing.T) {
	t.Parallel()
	files := loadGolden(t, "kinds")
	want, err := emit.Generate(files)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	c := cache.Open(t.TempDir(), [32]byte{7})

	// Empty cache, missing folder: plain generation, and the sum is recorded.
	got, err := emit.GenerateCached(files, out, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("cold cached generation differs:\n%s", d)
	}
	fams := files
	key := c.Key(emit.Fingerprint(fams[0]))
	p := emit.GoPath(fams[0])
	if sum, ok := c.Get(key); !ok || sum != cache.SumOf(want[p]) {
		t.Fatal("output sum not recorded")
	}

	// A tampered file on disk is not reused: the real output comes back.
	if _, err := tree.Write(out, emit.Files{p: append([]byte(emit.Header("x")+"\n"), "package x\n"...)}, emit.TreeOptions(false)); err != nil {
		t.Fatal(err)
	}
	got, _ = emit.GenerateCached(files, out, c)
	if !bytes.Equal(got[p], want[p]) {
		t.Fatal("a file that does not match the recorded sum was reused")
	}

	// A file whose hash matches the entry is taken from disk (shown here
	// with an entry that records a different output).
	marker := append([]byte(emit.Header("marker")+"\n"), "package marker\n"...)
	if err := os.WriteFile(filepath.Join(out, filepath.FromSlash(p)), marker, 0o644); err != nil {
		t.Fatal(err)
	}
	c.Put(key, cache.SumOf(marker))
	got, _ = emit.GenerateCached(files, out, c)
	if !bytes.Equal(got[p], marker) {
		t.Fatal("a verified file was not reused")
	}
	// ... but never by another generator build.
	got, _ = emit.GenerateCached(files, out, cache.Open(t.TempDir(), [32]byte{8}))
	if !bytes.Equal(got[p], want[p]) {
		t.Fatal("another generator reused the entry")
	}
}

func TestFingerprintSeesEveryInput(t *testing.T) {
	t.Parallel()
	fams := loadGolden(t, "kinds")
	base := emit.Fingerprint(fams[0])
	if !bytes.Equal(base, emit.Fingerprint(fams[0])) {
		t.Fatal("fingerprint is not deterministic")
	}
	changes := []func(f *ir.Family){
		func(f *ir.Family) { f.File.Path = "other.yaml" },
		func(f *ir.Family) { f.File.Origin = "other.yaml" },
		func(f *ir.Family) { f.Package = "other" },
		func(f *ir.Family) { f.Spec.Tasks[0].Inputs[4].Default = int64(25) },
		func(f *ir.Family) { f.Spec.Tasks[0].Inputs[4].Default = float64(17) }, // same number, other type
		func(f *ir.Family) { f.Spec.Variants[0].LoadKwargs["threads"] = int64(3) },
		func(f *ir.Family) { f.Spec.Tasks[0].Inputs[0].MinLength = nil },
		func(f *ir.Family) { f.Spec.Aliases = []string{} }, // nil vs empty
	}
	for i, change := range changes {
		fams := loadGolden(t, "kinds")
		change(fams[0])
		if bytes.Equal(base, emit.Fingerprint(fams[0])) {
			t.Errorf("change %d does not change the fingerprint", i)
		}
	}
}

// The header names the manifest's Origin when the caller sets one, and
// the fingerprint follows it: only the origin, not the path as given,
// reaches the output.
func TestOriginIsTheRecordedPath(t *testing.T) {
	t.Parallel()
	files := loadGolden(t, "kinds")
	files[0].File.Origin = "golden/kinds/input/kinds.yaml"
	out, origins, err := emit.GenerateWithOrigins(files, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := "goldenkinds/goldenkinds.go"
	if line, _, _ := bytes.Cut(out[p], []byte("\n")); string(line) != emit.Header("golden/kinds/input/kinds.yaml") {
		t.Errorf("header %q", line)
	}
	if origins[p] != files[0].File.Path || len(origins) != 1 {
		t.Errorf("origins = %v", origins)
	}
	fams := files
	withOrigin := emit.Fingerprint(fams[0])
	fams[0].File.Path = "elsewhere/kinds.yaml"
	if !bytes.Equal(withOrigin, emit.Fingerprint(fams[0])) {
		t.Error("the path as given changes the fingerprint although the origin is set")
	}
}
