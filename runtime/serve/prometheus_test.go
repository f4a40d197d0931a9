package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// prometheusBinary returns the path of Debian's prometheus server, or
// skips the test.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	return enginetest.Tool(t, "prometheus", "/usr/bin/prometheus", "Debian's prometheus package; scripts/setup.sh installs it")
}

// promQuery runs an instant query on the Prometheus HTTP API and returns
// the result's samples (labels, value).
func promQuery(t *testing.T, base, query string) ([]map[string]string, []float64, error) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, nil, err
	}
	if r.Status != "success" {
		return nil, nil, fmt.Errorf("query %s: %s", query, r.Error)
	}
	var labels []map[string]string
	var values []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("query %s: value %v", query, s.Value)
		}
		labels = append(labels, s.Metric)
		values = append(values, v)
	}
	return labels, values, nil
}

// TestPrometheusScrapesMetrics runs a real Prometheus server on loopback
// that scrapes the server's /metrics every 500 ms with the bearer token (a
// second job without it), sends infer requests meanwhile, and asks
// Prometheus's HTTP API for the request rate, a latency quantile and the
// targets' health.
func TestPrometheusScrapesMetrics(t *testing.T) {
	t.Parallel()
	bin := prometheusBinary(t)
	const token = "prom-scrape-token"
	s := start(t, serve.Config{Token: token})
	target := strings.TrimPrefix(s.url, "http://")

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
  evaluation_interval: 500ms
scrape_configs:
  - job_name: wfserve
    authorization:
      type: Bearer
      credentials_file: %s
    static_configs:
      - targets: [%q]
  - job_name: wfserve-without-token
    static_configs:
      - targets: [%q]
`, tokenFile, target, target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	base, exited := startPrometheus(t, bin, dir, configFile)

	// Traffic while Prometheus scrapes: a request every 20 ms, until the
	// test ends (bounded in count all the same).
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range 5000 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", strings.NewReader(tokensBody(8)))
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})

	// Poll the HTTP API until every query holds, within a generous bound.
	checks := []struct {
		query string
		ok    func(labels []map[string]string, values []float64) bool
	}{
		{`rate(wfserve_requests_total{job="wfserve",model="tiny-encoder",task="embed",code="200"}[3s])`,
			func(_ []map[string]string, v []float64) bool { return len(v) == 1 && v[0] > 0 }},
		{`histogram_quantile(0.5, sum by (le) (rate(wfserve_request_duration_seconds_bucket{job="wfserve",model="tiny-encoder"}[3s])))`,
			func(_ []map[string]string, v []float64) bool { return len(v) == 1 && v[0] > 0 && v[0] < 60 }},
		{`up{job="wfserve"}`, func(_ []map[string]string, v []float64) bool { return len(v) == 1 && v[0] == 1 }},
		{`up{job="wfserve-without-token"}`, func(_ []map[string]string, v []float64) bool { return len(v) == 1 && v[0] == 0 }},
		{`wfserve_queue_capacity{job="wfserve"}`, func(_ []map[string]string, v []float64) bool {
			return len(v) == 1 && v[0] == serve.DefaultMaxQueue
		}},
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, c := range checks {
		for {
			labels, values, err := promQuery(t, base, c.query)
			if err == nil && c.ok(labels, values) {
				t.Logf("%s = %v", c.query, values)
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("prometheus exited: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("query %s never held: %v %v (err %v)", c.query, labels, values, err)
			}
			time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
		}
	}
}

// servingDoc returns docs/serving.md.
func servingDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlBlock returns the docs' ```yaml block that starts with prefix.
func yamlBlock(t *testing.T, doc, prefix string) string {
	t.Helper()
	for _, part := range strings.Split(doc, "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.HasPrefix(block, prefix) {
			return block
		}
	}
	t.Fatalf("docs/serving.md has no yaml block starting %q", prefix)
	return ""
}

// TestDocsPrometheusExamples checks docs/serving.md's scrape config and
// alert rules with promtool (Debian's prometheus package).
func TestDocsPrometheusExamples(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package; scripts/setup.sh installs it)")
	}
	doc := servingDoc(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("t\n"), 0o600)
	// The example's token file, where this test can have one.
	config := strings.ReplaceAll(yamlBlock(t, doc, "scrape_configs:"), "/etc/prometheus/wfserve-token", token)
	rules := yamlBlock(t, doc, "groups:")
	for _, c := range []struct{ name, text, check string }{{"scrape.yml", config, "config"}, {"rules.yml", rules, "rules"}} {
		f := filepath.Join(dir, c.name)
		if err := os.WriteFile(f, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", c.check, f).CombinedOutput(); err != nil {
			t.Errorf("promtool check %s of the docs' example: %v\n%s\n%s", c.check, err, out, c.text)
		}
	}
}

// startPrometheus runs Prometheus with configFile on a reserved loopback
// port (enginetest.Port: its port must be given on its command line) and
// returns its URL once it is ready, and a channel that has its exit error
// should it exit. Should a program outside the tests hold the port all the
// same, Prometheus is started again on another.
func startPrometheus(t *testing.T, bin, dir, configFile string) (string, <-chan error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := enginetest.Port(t)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		out := &enginetest.Buffer{}
		cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", attempt)),
			"--web.listen-address="+fmt.Sprintf("127.0.0.1:%d", port), "--log.level=warn")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("prometheus output:\n%s", out.String())
			}
		})
		var gone bool
		var exitErr error
		enginetest.WaitFor(t, "prometheus to be ready", func() bool {
			select {
			case exitErr = <-exited:
				exited <- exitErr // for the cleanup
				gone = true
				return true
			default:
			}
			resp, err := http.Get(base + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		if !gone {
			return base, exited
		}
		if !strings.Contains(out.String(), "address already in use") || attempt == 3 {
			t.Fatalf("prometheus exited: %v\n%s", exitErr, out.String())
		}
	}
}
