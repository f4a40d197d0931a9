package emit_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// benchManifests writes n manifests into a new folder: the repository's
// manifests and the successful golden inputs, cycled, each with a unique
// family id (family aliases and go_package removed so nothing collides).
func benchManifests(b *testing.B, n int) string {
	b.Helper()
	var srcs []string
	for _, pat := range []string{"../../manifests/*.yaml", filepath.Join(goldenRoot, "[a-z]*", "input", "*.yaml")} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if !regexp.MustCompile(`/err-`).MatchString(filepath.ToSlash(p)) {
				srcs = append(srcs, p)
			}
		}
	}
	if len(srcs) == 0 {
		b.Fatal("no manifests to copy")
	}
	dir := b.TempDir()
	id := regexp.MustCompile(`(?m)^model_family_id: *(\S+)`)
	drop := regexp.MustCompile(`(?m)^(aliases|go_package):.*\n`)
	for i := 0; i < n; i++ {
		src, err := os.ReadFile(srcs[i%len(srcs)])
		if err != nil {
			b.Fatal(err)
		}
		src = drop.ReplaceAll(src, nil)
		src = id.ReplaceAll(src, []byte(fmt.Sprintf("model_family_id: bench-%03d-$1", i)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%03d.yaml", i)), src, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// cpuTimer reports the process CPU time per operation ("cpu-ms/op") next
// to the wall time, so that figures taken on a busy machine stay
// meaningful: CPU time is what one core spends, whatever else runs.
type cpuTimer struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) cpuTimer {
	b.ResetTimer()
	return cpuTimer{cpuNow()}
}

func (c cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-c.start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// generateInto is what "wfgen generate --clean -o out manifests" does;
// with cacheDir set, it opens the cache as the command does (hashing the
// running executable).
func generateInto(b *testing.B, manifests, out, cacheDir string) tree.Report {
	var c *cache.Cache
	if cacheDir != "" {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		gen, err := cache.FileSum(exe)
		if err != nil {
			b.Fatal(err)
		}
		c = cache.Open(cacheDir, gen)
	}
	files, diags, err := emit.PathsCached([]string{manifests}, out, c)
	if err != nil || len(diags) > 0 {
		b.Fatalf("generate: %v %v", err, diags)
	}
	rep, err := tree.Write(out, files, emit.TreeOptions(true))
	if err != nil {
		b.Fatal(err)
	}
	return rep
}

// BenchmarkGenerate100Cold validates 100 manifests, generates their
// packages and writes them into an empty folder, without a cache.
func BenchmarkGenerate100Cold(b *testing.B) {
	manifests := benchManifests(b, 100)
	parent := b.TempDir()
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		out := filepath.Join(parent, fmt.Sprint(i))
		if rep := generateInto(b, manifests, out, ""); rep.Written() != 100 {
			b.Fatalf("wrote %d files, want 100", rep.Written())
		}
	}
	cpu.report(b)
}

// BenchmarkGenerate100ColdEmptyCache is the cold run as the command does it
// the first time: an empty cache that it fills.
func BenchmarkGenerate100ColdEmptyCache(b *testing.B) {
	manifests := benchManifests(b, 100)
	parent := b.TempDir()
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		out := filepath.Join(parent, fmt.Sprint(i))
		if rep := generateInto(b, manifests, out, filepath.Join(parent, fmt.Sprint("cache", i))); rep.Written() != 100 {
			b.Fatalf("wrote %d files, want 100", rep.Written())
		}
	}
	cpu.report(b)
}

// BenchmarkRegenerate100NoOp runs the command again over an up-to-date
// folder with its cache: it must write nothing.
func BenchmarkRegenerate100NoOp(b *testing.B) {
	benchNoOp(b, true)
}

// BenchmarkRegenerate100NoOpNoCache is the no-op run without a cache
// (WFGEN_CACHE=off, or the first run on a machine): every package is
// generated and compared.
func BenchmarkRegenerate100NoOpNoCache(b *testing.B) {
	benchNoOp(b, false)
}

func benchNoOp(b *testing.B, cached bool) {
	manifests := benchManifests(b, 100)
	out := filepath.Join(b.TempDir(), "out")
	cacheDir := ""
	if cached {
		cacheDir = b.TempDir()
	}
	generateInto(b, manifests, out, cacheDir)
	cpu := startCPU(b)
	written := 0
	for i := 0; i < b.N; i++ {
		written += generateInto(b, manifests, out, cacheDir).Written()
	}
	cpu.report(b)
	b.ReportMetric(float64(written)/float64(b.N), "files-written/op")
	if written != 0 {
		b.Fatalf("no-op regeneration wrote %d files", written)
	}
}

// BenchmarkValidate100 is the validation share of the runs above (package
// validate): loading and checking the same 100 manifests.
func BenchmarkValidate100(b *testing.B) {
	manifests := benchManifests(b, 100)
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		if _, diags, err := validate.Paths([]string{manifests}); err != nil || len(diags) > 0 {
			b.Fatal(err, diags)
		}
	}
	cpu.report(b)
}

// BenchmarkGoSourceKinds renders one family (golden/kinds, 975 lines) in
// memory: jennifer, then gofmt.
func BenchmarkGoSourceKinds(b *testing.B) {
	fams, diags, err := validate.Paths([]string{filepath.Join(goldenRoot, "kinds", "input")})
	if err != nil || len(diags) > 0 {
		b.Fatal(err, diags)
	}
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		if _, err := emit.GoSource(fams[0]); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkGenerateScale runs the wfgen command (built once) over 1,000 and
// 10,000 manifests into an empty folder, each run a process of its own, and
// reports its peak resident memory ("peak-MB", the kernel's maxrss) and
// its CPU time per manifest ("cpu-ms/manifest"): flat memory and a flat
// per-manifest time are the streaming generator's promise (target: ≤ 300 MB
// at 10,000). Slow (about a minute of CPU at 10,000): run it by name.
func BenchmarkGenerateScale(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "wfgen")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/wfgen")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building wfgen: %v\n%s", err, out)
	}
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			in := benchManifests(b, n)
			var peak int64
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				out := filepath.Join(b.TempDir(), "out")
				cmd := exec.Command(bin, "generate", "-o", out, in)
				cmd.Dir = b.TempDir() // outside any wfgen.yaml
				cmd.Env = append(os.Environ(), "WFGEN_CACHE=off")
				if msg, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("wfgen generate: %v\n%s", err, msg)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				peak = max(peak, ru.Maxrss)
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(peak)/1024, "peak-MB")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n*b.N), "cpu-ms/manifest")
		})
	}
}
