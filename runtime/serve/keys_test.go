package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// A key file's mistakes are refused, each named.
func TestParseKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ doc, want string }{
		{`keys: []`, "no keys"},
		{`keys: [{key: 0123456789abcdef}]`, "key 1 has no name"},
		{`keys: [{name: a, key: 0123456789abcdef}, {name: a, key: fedcba9876543210}]`, `two keys are named "a"`},
		{`keys: [{name: a, key: short}]`, `key "a" is shorter than 16 bytes`},
		{`keys: [{name: a, key: 0123456789abcdef}, {name: b, key: 0123456789abcdef}]`, `key "b" has the secret of another key`},
		{`keys: [{name: a, key: 0123456789abcdef, rate: -1}]`, "must be finite and not negative"},
		{`keys: [{name: a, key: 0123456789abcdef, rates: 3}]`, "field rates not found"},
	} {
		if _, err := serve.ParseKeys([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	keys, err := serve.ParseKeys([]byte(`{"keys": [{"name": "a", "key": "0123456789abcdef", "models": ["m"], "rate": 2.5, "burst": 5}]}`))
	if err != nil || len(keys) != 1 || keys[0].Rate != 2.5 || keys[0].Burst != 5 || keys[0].Models[0] != "m" {
		t.Errorf("JSON key file: %+v %v", keys, err)
	}
}

// Named keys: each request carries one; a key over its rate is answered
// 429 (Retry-After over REST, ResourceExhausted over gRPC, one bucket for
// both) while another key is unaffected; a key limited to some models gets
// 403 (PermissionDenied) for the others; logs and metrics name the key,
// never the secret; replacing the keys while serving takes effect at once.
func TestKeysAndQuotas(t *testing.T) {
	t.Parallel()
	const (
		alice = "alice-secret-0123456789" // one request, then one per 1,000 s
		bob   = "bob-secret-0123456789ab" // no limit
		carol = "carol-secret-0123456789" // tiny-world only
	)
	keys := serve.NewKeys(
		serve.Key{Name: "alice", Key: alice, Rate: 0.001, Burst: 1},
		serve.Key{Name: "bob", Key: bob},
		serve.Key{Name: "carol", Key: carol, Models: []string{"tiny-world"}},
	)
	s := withGRPC(t, start(t, serve.Config{Keys: keys}))
	infer := func(key string) (int, http.Header, string) {
		code, h, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody, "Authorization", "Bearer "+key, "Content-Type", "application/json")
		return code, h, string(b)
	}
	if code, _, b := infer(alice); code != http.StatusOK {
		t.Fatalf("alice's first request: %d %s", code, b)
	}
	st, h, b := infer(alice)
	if ra, _ := strconv.Atoi(h.Get("Retry-After")); st != http.StatusTooManyRequests || ra < 1 || !strings.Contains(b, `key \"alice\" is over its rate`) {
		t.Errorf("alice over her rate: %d Retry-After %q %s", st, h.Get("Retry-After"), b)
	}
	for range 5 {
		if code, _, b := infer(bob); code != http.StatusOK {
			t.Fatalf("bob, while alice is over her rate: %d %s", code, b)
		}
	}
	ctx := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
	}
	if _, err := s.oip.ModelInfer(ctx(alice), embedRequest(1, 2, 3)); code(err) != codes.ResourceExhausted {
		t.Errorf("alice over gRPC: %v, want ResourceExhausted", err)
	}
	if _, err := s.oip.ModelInfer(ctx(bob), embedRequest(1, 2, 3)); err != nil {
		t.Errorf("bob over gRPC: %v", err)
	}
	// Carol may use tiny-world only.
	if code, _, b := infer(carol); code != http.StatusForbidden || !strings.Contains(b, `key \"carol\" may not use model \"tiny-encoder\"`) {
		t.Errorf("carol on tiny-encoder: %d %s", code, b)
	}
	if code, _, b := call(t, "GET", s.url+"/v2/models/tiny-world", "", "Authorization", "Bearer "+carol); code != http.StatusOK {
		t.Errorf("carol on tiny-world: %d %s", code, b)
	}
	if _, err := s.oip.ModelInfer(ctx(carol), embedRequest(1, 2, 3)); code(err) != codes.PermissionDenied {
		t.Errorf("carol over gRPC on tiny-encoder: %v, want PermissionDenied", err)
	}

	waitMetrics(t, s.url, bob, check(
		want{"wfserve_key_requests_total", map[string]string{"key": "alice", "code": "200"}, 1},
		want{"wfserve_key_requests_total", map[string]string{"key": "alice", "code": "429"}, 2},
		want{"wfserve_key_requests_total", map[string]string{"key": "carol", "code": "403"}, 2},
	))
	var named bool
	for _, r := range s.logs.all() {
		line := fmt.Sprint(r)
		for _, secret := range []string{alice, bob, carol} {
			if strings.Contains(line, secret) {
				t.Fatalf("a log record holds a key: %v", r)
			}
		}
		named = named || r["key"] == "alice" && r["status"] == float64(http.StatusTooManyRequests)
	}
	if !named {
		t.Error("no access log record names alice's refusal")
	}

	// New keys while serving: bob's is gone, dave's works.
	keys.Set(serve.Key{Name: "dave", Key: "dave-secret-0123456789a"})
	if code, _, _ := infer(bob); code != http.StatusUnauthorized {
		t.Errorf("bob after his key was removed: %d", code)
	}
	if code, _, b := infer("dave-secret-0123456789a"); code != http.StatusOK {
		t.Errorf("dave's new key: %d %s", code, b)
	}
}
