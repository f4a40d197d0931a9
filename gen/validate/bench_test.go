package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// builtins returns the built-in manifests' contents by file name.
func builtins(b *testing.B) map[string][]byte {
	b.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "manifests", "*.yaml"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no manifests: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		out[filepath.Base(p)] = data
	}
	return out
}

// BenchmarkValidate1000 validates a folder of 1,000 manifests (copies of the
// built-in ones under distinct family ids) with Paths, reading them from
// disk. Run with -cpu 1 for the single-core figure.
func BenchmarkValidate1000(b *testing.B) {
	dir := thousand(b)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		files, diags, err := Paths([]string{dir})
		if err != nil || len(diags) > 0 || len(files) != 1000 {
			b.Fatalf("got %d files, %d diagnostics, %v", len(files), len(diags), err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "manifests/s")
	// Wall time suffers when other processes share the cores; the process's
	// CPU time much less, so report throughput per CPU-second too.
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(1000*b.N)/cpu.Seconds(), "manifests/cpu-s")
	}
}

// thousand writes 1,000 manifests (copies of the built-in ones under
// distinct family ids, without aliases) to a temporary folder.
func thousand(b *testing.B) string {
	b.Helper()
	src := builtins(b)
	var names []string
	for n := range src {
		names = append(names, n)
	}
	slices.Sort(names)
	dir := b.TempDir()
	for i := range 1000 {
		name := names[i%len(names)]
		data := string(src[name])
		id := strings.TrimSuffix(name, ".yaml")
		data = strings.Replace(data, "model_family_id: "+id, fmt.Sprintf("model_family_id: %s-%04d", id, i), 1)
		// Family names must be unique across the files: drop the aliases.
		data = regexp.MustCompile(`(?m)^aliases: .*$`).ReplaceAllString(data, "")
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%04d-%s", i, name)), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkCheck1000 is BenchmarkValidate1000 the way "wfgen validate"
// runs: Check (no files kept) with the CLI's GC setting.
func BenchmarkCheck1000(b *testing.B) {
	dir := thousand(b)
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		n, diags, err := Check([]string{dir})
		if err != nil || len(diags) > 0 || n != 1000 {
			b.Fatalf("got %d valid, %d diagnostics, %v", n, len(diags), err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "manifests/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(1000*b.N)/cpu.Seconds(), "manifests/cpu-s")
	}
}

// BenchmarkBytes validates each built-in manifest from memory.
func BenchmarkBytes(b *testing.B) {
	src := builtins(b)
	for name, data := range src {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, diags := Bytes(name, data); len(diags) > 0 {
					b.Fatal(diags)
				}
			}
		})
	}
}
