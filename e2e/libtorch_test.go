//go:build cgo

package e2e_test

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
)

// debianAPIInclude is the C++ API include directory the default build adds.
const debianAPIInclude = "/usr/include/torch/csrc/api/include"

// runEnv runs name in dir with env added to the environment and returns its
// combined output and error.
func runEnv(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// relocatedLibtorch makes a prefix laid out like an unpacked pytorch.org zip
// (include/, lib/) from Debian's libtorch, by symbolic links, so that its
// headers and libraries are reached through paths the default build does
// not use. (Linking all of /usr/include instead would put the C library's
// headers ahead of the C++ library's, which breaks the build.)
func relocatedLibtorch(t *testing.T) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "libtorch")
	must(t, os.MkdirAll(filepath.Join(prefix, "lib"), 0o755))
	must(t, os.MkdirAll(filepath.Join(prefix, "include"), 0o755))
	for _, d := range []string{"torch", "ATen", "c10", "caffe2", "kineto"} {
		if _, err := os.Stat(filepath.Join("/usr/include", d)); err != nil {
			if d == "torch" {
				t.Skipf("no /usr/include/torch (install Debian's libtorch-dev): %v", err)
			}
			continue
		}
		must(t, os.Symlink(filepath.Join("/usr/include", d), filepath.Join(prefix, "include", d)))
	}
	for _, lib := range []string{"libtorch.so", "libtorch_cpu.so", "libc10.so"} {
		out, err := exec.Command("g++", "-print-file-name="+lib).Output()
		path := strings.TrimSpace(string(out))
		if err != nil || !filepath.IsAbs(path) {
			t.Skipf("%s not found by g++ (install Debian's libtorch-dev): %v %s", lib, err, out)
		}
		must(t, os.Symlink(path, filepath.Join(prefix, "lib", lib)))
	}
	return prefix
}

// libtorchPC runs scripts/libtorch-pc.sh on prefix. The script is read
// here, not by bash, so that Go's test cache sees it change.
func libtorchPC(t *testing.T, root, prefix string) *exec.Cmd {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(root, "scripts", "libtorch-pc.sh"))
	must(t, err)
	return exec.Command("bash", "-c", string(script), "libtorch-pc.sh", prefix)
}

// writePC writes scripts/libtorch-pc.sh's output for prefix into a new
// directory and returns that directory (for PKG_CONFIG_PATH).
func writePC(t *testing.T, root, prefix string) (dir, pc string) {
	t.Helper()
	out, err := libtorchPC(t, root, prefix).Output()
	if err != nil {
		t.Fatalf("scripts/libtorch-pc.sh %s: %v\n%s", prefix, err, errOutput(err))
	}
	dir = t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "libtorch.pc"), out, 0o644))
	return dir, string(out)
}

func errOutput(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// A downstream module (a generated package and a main that links the
// engine) builds with -tags libtorch_custom against a libtorch found only
// through CGO_CXXFLAGS and CGO_LDFLAGS, taken from the libtorch.pc that
// scripts/libtorch-pc.sh writes, as docs/engine.md says: without them the
// tag leaves the shim no libtorch, which stops at the shim's #error naming
// docs/engine.md; with them, the shim compiles against the relocated prefix
// (never Debian's default include path) and the program runs through the
// rpath the flags add.
func TestDownstreamModuleWithCustomLibtorch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the engine's shim for a relocated libtorch; skipped with -short")
	}
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("pkg-config not installed (Debian's pkgconf; scripts/setup.sh installs it)")
	}
	root := repoRoot(t)
	prefix := relocatedLibtorch(t)
	pcDir, pc := writePC(t, root, prefix)
	for _, want := range []string{"-I${includedir}/torch/csrc/api/include", "-Wl,-rpath,${libdir}", "-ltorch -ltorch_cpu -lc10", "libdir=" + filepath.Join(prefix, "lib")} {
		if !strings.Contains(pc, want) {
			t.Fatalf("libtorch.pc lacks %q:\n%s", want, pc)
		}
	}
	var flags []string
	for _, v := range []struct{ name, opt string }{{"CGO_CXXFLAGS", "--cflags"}, {"CGO_LDFLAGS", "--libs"}} {
		cmd := exec.Command("pkg-config", v.opt, "libtorch")
		cmd.Env = append(os.Environ(), "PKG_CONFIG_PATH="+pcDir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pkg-config %s libtorch: %v\n%s", v.opt, err, errOutput(err))
		}
		flags = append(flags, v.name+"="+strings.TrimSpace(string(out)))
	}

	dir := t.TempDir()
	ckpt := filepath.Join(dir, "tiny-encoder.pt")
	must(t, tinymodels.BuildEncoder(ckpt))
	manifest, err := os.ReadFile(filepath.Join(root, "manifests", "tiny-encoder.yaml"))
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "manifests", "tiny-encoder.yaml"), manifest, 0o644))
	gomod := "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0\n\nreplace github.com/worldfoundry/wfgen => " + root + "\n"
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "cmd", "embed"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmd", "embed", "main.go"), []byte(program), 0o644))
	wfgen := filepath.Join(dir, "wfgen")
	if out, err := runEnv(root, nil, "go", "build", "-o", wfgen, "./cmd/wfgen"); err != nil {
		t.Fatalf("building wfgen: %v\n%s", err, out)
	}
	if out, err := runEnv(dir, nil, wfgen, "generate", "-o", "models", "manifests"); err != nil {
		t.Fatalf("wfgen generate: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "embed")

	// The tag without the variables: the Debian path is gone, so the shim
	// stops at its #error.
	out, err := runEnv(dir, []string{"CGO_CXXFLAGS=", "CGO_LDFLAGS="}, "go", "build", "-tags", "libtorch_custom", "-o", bin, "./cmd/embed")
	if err == nil || !strings.Contains(out, "libtorch headers not found") || !strings.Contains(out, "docs/engine.md") {
		t.Fatalf("build with -tags libtorch_custom and no libtorch: err %v, want the shim's #error naming docs/engine.md:\n%s", err, out)
	}

	out, err = runEnv(dir, flags, "go", "build", "-x", "-tags", "libtorch_custom", "-o", bin, "./cmd/embed")
	if err != nil {
		t.Fatalf("build with -tags libtorch_custom and %q: %v\n%s", flags, err, lastLines(out, 30))
	}
	// The shim was compiled (the flags name the temporary prefix, and Go's
	// cache keys on them, so it cannot come from the cache) with the
	// prefix's include path only.
	var shimCompile string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "shim.cpp") && strings.Contains(line, "-c") {
			shimCompile = line
		}
	}
	if shimCompile == "" {
		t.Fatalf("go build -x shows no compile of shim.cpp:\n%s", lastLines(out, 30))
	}
	if want := "-I" + filepath.Join(prefix, "include", "torch", "csrc", "api", "include"); !strings.Contains(shimCompile, want) {
		t.Errorf("shim compile lacks %s:\n%s", want, shimCompile)
	}
	if strings.Contains(shimCompile, debianAPIInclude) {
		t.Errorf("shim compile uses Debian's %s:\n%s", debianAPIInclude, shimCompile)
	}
	f, err := elf.Open(bin)
	must(t, err)
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	rpath, _ := f.DynString(elf.DT_RPATH)
	f.Close()
	if lib := filepath.Join(prefix, "lib"); !strings.Contains(strings.Join(append(runpath, rpath...), ":"), lib) {
		t.Errorf("binary's run path %v %v lacks %s", runpath, rpath, lib)
	}

	cmd := exec.Command(bin, ckpt)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=")
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running the program: %v\n%s", err, res)
	}
	var got [][]float32
	if err := json.Unmarshal(res[strings.Index(string(res), "["):], &got); err != nil || len(got) != 5 {
		t.Fatalf("program output %q: %v; want 5 embeddings", res, err)
	}
}

// scripts/libtorch-pc.sh reads the C++ ABI from TorchConfig.cmake (the
// pre-cxx11 pytorch.org zips need -D_GLIBCXX_USE_CXX11_ABI=0) and links the
// CUDA libraries when the build has them; it refuses a directory that is not
// a libtorch.
func TestLibtorchPCVariants(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	prefix := relocatedLibtorch(t)
	_, pc := writePC(t, root, prefix)
	if strings.Contains(pc, "_GLIBCXX_USE_CXX11_ABI") || strings.Contains(pc, "cuda") {
		t.Errorf("Debian's libtorch (cxx11 ABI, CPU) got:\n%s", pc)
	}

	cmake := filepath.Join(prefix, "share", "cmake", "Torch")
	must(t, os.MkdirAll(cmake, 0o755))
	must(t, os.WriteFile(filepath.Join(cmake, "TorchConfig.cmake"), []byte("if(CMAKE_SYSTEM_NAME STREQUAL \"Linux\")\n  set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")\nendif()\n"), 0o644))
	for _, lib := range []string{"libtorch_cuda.so", "libc10_cuda.so"} {
		must(t, os.WriteFile(filepath.Join(prefix, "lib", lib), nil, 0o644))
	}
	_, pc = writePC(t, root, prefix)
	for _, want := range []string{"Cflags: -I${includedir} -I${includedir}/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=0",
		"-Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -ltorch_cuda -lc10_cuda -Wl,--as-needed"} {
		if !strings.Contains(pc, want) {
			t.Errorf("pre-cxx11 CUDA libtorch: .pc lacks %q:\n%s", want, pc)
		}
	}

	out, err := libtorchPC(t, root, t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not a libtorch directory") {
		t.Errorf("libtorch-pc.sh on an empty directory: %v\n%s", err, out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
