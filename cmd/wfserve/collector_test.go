package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// gauge reads a metric without labels from the server's /metrics.
func gauge(t *testing.T, url, name string) uint64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(v)
}

// wfserve runs Go's collector with GOGC 400 and a soft memory limit of
// twice the in-flight bytes plus 32 MiB, unless the environment sets GOGC
// or GOMEMLIMIT: then the environment's values apply.
func TestCollectorSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		env, args  []string
		gogc, limt uint64
	}{
		{"defaults", nil, nil, 400, 2*4*serve.DefaultMaxBodyBytes + 32<<20},
		{"in-flight bytes", nil, []string{"-max-body", strconv.Itoa(8 << 20), "-max-inflight-bytes", strconv.Itoa(100 << 20)}, 400, 2*100<<20 + 32<<20},
		{"environment", []string{"GOGC=150", "GOMEMLIMIT=1GiB"}, nil, 150, 1 << 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProcEnv(t, c.env, c.args...)
			if got := gauge(t, p.url, "go_gc_gogc_percent"); got != c.gogc {
				t.Errorf("GOGC %d, want %d", got, c.gogc)
			}
			if got := gauge(t, p.url, "go_gc_gomemlimit_bytes"); got != c.limt {
				t.Errorf("memory limit %d, want %d", got, c.limt)
			}
			if want := "gogc=" + strconv.FormatUint(c.gogc, 10); !regexp.MustCompile(`msg=serving .*\b` + want + `\b`).MatchString(p.stderr.String()) {
				t.Errorf("the serving record does not say %s:\n%s", want, p.stderr.String())
			}
		})
	}
}
