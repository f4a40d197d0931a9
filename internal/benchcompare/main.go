// Command benchcompare is `make bench-compare`: it runs, in one go, every
// benchmark that measures wfgen against a peer — the libtorch engine
// against a plain C++ loop and Python (runtime/torch BenchmarkInterleaved),
// the generated batch client against Python (runtime/client
// BenchmarkEmbedBatchInterleaved), the lanes the executor chooses against
// forced ones (runtime/client BenchmarkAutoLanesInterleaved), compiled against eager modules
// (runtime/torch BenchmarkCompileInterleaved) and, unless -serve=false, the
// serving load test against FastAPI (runtime/serve/internal/servebench) —
// and prints the Markdown table that docs/benchmarks/README.md shows, one row per
// comparison with its target.
//
// Each benchmark interleaves its columns round by round (see each one's
// doc comment); -rounds sets the rounds of the engine, batch and compile
// benchmarks. Python columns need Debian's python3-torch (and
// python3-torchvision for mobilenet); the benchmarks skip them otherwise.
//
//	go run ./internal/benchcompare [-rounds 20] [-serve=true]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

func main() {
	rounds := flag.Int("rounds", 20, "rounds of each interleaved benchmark")
	serve := flag.Bool("serve", true, "also run the serving load test")
	flag.Parse()
	if err := run(*rounds, *serve, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
		os.Exit(1)
	}
}

// result is one benchmark line: its name (without the GOMAXPROCS suffix)
// and its metrics by unit.
type result struct {
	name    string
	metrics map[string]float64
}

// parse reads `go test -bench` output.
func parse(out []byte) []result {
	var res []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := result{name: strings.TrimPrefix(name, "Benchmark"), metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r.metrics[f[i+1]] = v
			}
		}
		res = append(res, r)
	}
	return res
}

// bench runs one `go test -bench` and returns its results; its output also
// goes to log as it comes.
func bench(log io.Writer, args ...string) ([]result, error) {
	fmt.Fprintf(log, "$ go %s\n", strings.Join(args, " "))
	var buf bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stdout = io.MultiWriter(&buf, log)
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return parse(buf.Bytes()), nil
}

// row is one line of the table.
type row struct {
	comparison, wfgen, peer, ratio, target string
}

func run(rounds int, serve bool, stdout, log io.Writer) error {
	n := fmt.Sprintf("%dx", rounds)
	var rows []row
	engine, err := bench(log, "test", "-tags", "wfbench", "-run", "^$", "-bench", "^BenchmarkInterleaved$", "-benchtime", n, "./runtime/torch/")
	if err != nil {
		return err
	}
	for _, r := range engine {
		m := r.metrics
		rows = append(rows,
			row{r.name + ": Go ÷ C++ loop", us(m["go-ns/call"]), us(m["cpp-ns/call"]) + " (C++)", x(m["go/cpp"]), "≤ 1.05 (tiny ≤ 1.10)"},
			row{r.name + ": Go ÷ Python", us(m["go-ns/call"]), us(m["py-ns/call"]) + " (Python)", x(m["go/py"]), "< 1"})
	}
	batch, err := bench(log, "test", "-run", "^$", "-bench", "^BenchmarkEmbedBatchInterleaved$", "-benchtime", n, "./runtime/client/")
	if err != nil {
		return err
	}
	for _, r := range batch {
		m := r.metrics
		rows = append(rows,
			row{"tiny encoder, 10,000 items in batches of 8: generated EmbedBatch, default settings, ÷ Python slicing a pre-stacked tensor (throughput)", items(m["go-items/s"]), items(m["py-slice-items/s"]), x(m["go/py-slice-x"]), "≥ 1.2"},
			row{"the same with one lane (batch.WithLanes(1)) ÷ Python slicing (throughput)", items(m["go-1lane-items/s"]), items(m["py-slice-items/s"]), x(m["go-1lane/py-slice-x"]), "—"},
			row{"the generated EmbedBatch, default settings, ÷ Python stacking per batch (throughput)", items(m["go-items/s"]), items(m["py-stack-items/s"]), x(m["go/py-stack-x"]), "—"})
	}
	lanes, err := bench(log, "test", "-run", "^$", "-bench", "^BenchmarkAutoLanesInterleaved$", "-benchtime", fmt.Sprintf("%dx", max(3, rounds/2)), "./runtime/client/")
	if err != nil {
		return err
	}
	for _, r := range lanes {
		m := r.metrics
		rows = append(rows,
			row{fmt.Sprintf("%s: default settings (the executor chose %.0f lanes) ÷ one lane (throughput)", r.name, m["lanes"]), items(m["default-items/s"]), items(m["1lane-items/s"]) + " (one lane)", x(m["default/1lane-x"]), "mobilenet ≥ 0.98"},
			row{r.name + ": the same choosing afresh in every run (a client's first run) ÷ one lane", items(m["cold-items/s"]), items(m["1lane-items/s"]) + " (one lane)", x(m["cold/1lane-x"]), "—"})
	}
	compile, err := bench(log, "test", "-run", "^$", "-bench", "^BenchmarkCompileInterleaved$", "-benchtime", fmt.Sprintf("%dx", max(3, rounds/4)), "./runtime/torch/")
	if err != nil {
		return err
	}
	for _, r := range compile {
		m := r.metrics
		rows = append(rows, row{r.name + ": compiled (default backend) ÷ eager (time)", us(m["optimize-µs/call"] * 1000), us(m["eager-µs/call"]*1000) + " (eager)", x(m["optimize/eager"]), "measured; sets the default"})
	}
	fmt.Fprintln(stdout, "| comparison | wfgen | peer | ratio (median of rounds) | target |")
	fmt.Fprintln(stdout, "| --- | --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s |\n", r.comparison, r.wfgen, r.peer, r.ratio, r.target)
	}
	if serve {
		fmt.Fprintln(stdout)
		cmd := exec.Command("go", "run", "./runtime/serve/internal/servebench")
		cmd.Stdout, cmd.Stderr = stdout, log
		fmt.Fprintln(log, "$ go run ./runtime/serve/internal/servebench")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("servebench: %w", err)
		}
	}
	return nil
}

func us(ns float64) string {
	if ns == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", ns/1000)
}

func items(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f items/s", v)
}

func x(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f", v)
}
