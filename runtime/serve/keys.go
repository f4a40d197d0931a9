package serve

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// API keys: who may call, which models, how often.
//
// A key file lists named keys (YAML or JSON):
//
//	keys:
//	  - name: batch-jobs          # in logs and metrics; never the key itself
//	    key: 7d1f...              # the bearer token
//	    models: [tiny-encoder]    # optional: the models it may use (all when absent)
//	    rate: 20                  # optional: requests per second (token bucket)
//	    burst: 40                 # optional: the bucket's size (default: rate, at least 1)
//
// Every request but the health probes and the playground's pages must carry
// one of the keys (Authorization: Bearer KEY, or the WebSocket subprotocol
// form on session endpoints); a key over its rate is answered 429 with
// Retry-After, a model outside its list 403. A key's limit is its own: one
// client over its quota does not touch another's. Keys.Reload replaces the
// set while serving (wfserve does on SIGHUP); buckets of keys whose name
// and rate stay keep their state.

// Key is one API key of a key file.
type Key struct {
	// Name names the key in logs and metrics.
	Name string `json:"name" yaml:"name"`
	// Key is the secret, sent as the bearer token.
	Key string `json:"key" yaml:"key"`
	// Models are the models (family ids) the key may use; empty: all.
	Models []string `json:"models,omitempty" yaml:"models,omitempty"`
	// Rate is the requests per second the key may make, on average; 0: no
	// limit.
	Rate float64 `json:"rate,omitempty" yaml:"rate,omitempty"`
	// Burst is how many requests the key may make at once (the bucket's
	// size); 0: Rate rounded up, at least 1.
	Burst int `json:"burst,omitempty" yaml:"burst,omitempty"`
}

// Keys is a set of API keys, safe to use and replace concurrently. The zero
// value holds no key; a Server whose Config.Keys is nil (and Token empty)
// asks for none.
type Keys struct {
	set atomic.Pointer[[]*apiKey]
}

// apiKey is a key in use: its bucket and its model list as a set.
type apiKey struct {
	Key
	models map[string]bool

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// keyFile is a key file's document.
type keyFile struct {
	Keys []Key `json:"keys" yaml:"keys"`
}

// ParseKeys reads a key file's document: every key needs a unique name and
// a unique key of at least 16 bytes; rate and burst are not negative.
func ParseKeys(b []byte) ([]Key, error) {
	var f keyFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New("key file: no keys (want keys: [{name: ..., key: ...}])")
	}
	names, secrets := map[string]bool{}, map[string]bool{}
	for i, k := range f.Keys {
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("key file: key %d has no name", i+1)
		case names[k.Name]:
			return nil, fmt.Errorf("key file: two keys are named %q", k.Name)
		case len(k.Key) < 16:
			return nil, fmt.Errorf("key file: key %q is shorter than 16 bytes", k.Name)
		case secrets[k.Key]:
			return nil, fmt.Errorf("key file: key %q has the secret of another key", k.Name)
		case k.Rate < 0 || math.IsNaN(k.Rate) || math.IsInf(k.Rate, 0) || k.Burst < 0:
			return nil, fmt.Errorf("key file: key %q: rate %v and burst %d must be finite and not negative", k.Name, k.Rate, k.Burst)
		}
		names[k.Name], secrets[k.Key] = true, true
	}
	return f.Keys, nil
}

// NewKeys returns a set holding keys (see ParseKeys for what they must be).
func NewKeys(keys ...Key) *Keys {
	k := &Keys{}
	k.Set(keys...)
	return k
}

// LoadKeys reads a key file.
func LoadKeys(path string) (*Keys, error) {
	k := &Keys{}
	if err := k.Reload(path); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload replaces the keys with path's; on error the keys in use stay.
func (ks *Keys) Reload(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ks.Set(keys...)
	return nil
}

// Set replaces the keys. A key whose name, rate and burst are those of a
// key in use keeps that key's bucket.
func (ks *Keys) Set(keys ...Key) {
	old := map[string]*apiKey{}
	if p := ks.set.Load(); p != nil {
		for _, k := range *p {
			old[k.Name] = k
		}
	}
	now := time.Now()
	set := make([]*apiKey, 0, len(keys))
	for _, k := range keys {
		a := &apiKey{Key: k, last: now}
		if k.Burst == 0 {
			a.Burst = max(1, int(math.Ceil(k.Rate)))
		}
		a.tokens = float64(a.Burst)
		if len(k.Models) > 0 {
			a.models = map[string]bool{}
			for _, m := range k.Models {
				a.models[m] = true
			}
		}
		if o := old[k.Name]; o != nil && o.Rate == a.Rate && o.Burst == a.Burst {
			o.mu.Lock()
			a.tokens, a.last = o.tokens, o.last
			o.mu.Unlock()
		}
		set = append(set, a)
	}
	ks.set.Store(&set)
}

// Names returns the keys' names, sorted.
func (ks *Keys) Names() []string {
	var out []string
	if p := ks.set.Load(); p != nil {
		for _, k := range *p {
			out = append(out, k.Name)
		}
	}
	slices.Sort(out)
	return out
}

// match returns the key whose secret is secret, nil for none; it compares
// with every key in constant time.
func (ks *Keys) match(secret string) *apiKey {
	if ks == nil || secret == "" {
		return nil
	}
	p := ks.set.Load()
	if p == nil {
		return nil
	}
	var found *apiKey
	for _, k := range *p {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(k.Key.Key)) == 1 {
			found = k
		}
	}
	return found
}

// take spends one request of the key's bucket at now, or says how long
// until one is there.
func (k *apiKey) take(now time.Time) (ok bool, wait time.Duration) {
	if k.Rate == 0 {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if dt := now.Sub(k.last).Seconds(); dt > 0 {
		k.tokens = min(float64(k.Burst), k.tokens+dt*k.Rate)
		k.last = now
	}
	if k.tokens >= 1 {
		k.tokens--
		return true, 0
	}
	return false, time.Duration((1 - k.tokens) / k.Rate * float64(time.Second))
}

// admit checks a request's key: nil when it may go on, else the refusal —
// 429 (with the wait) over its rate.
func (k *apiKey) admit(now time.Time) error {
	if ok, wait := k.take(now); !ok {
		return &statusError{status: http.StatusTooManyRequests, err: &rateLimited{key: k.Name, wait: wait}}
	}
	return nil
}

// allows reports whether the key may use the model.
func (k *apiKey) allows(model string) bool { return k.models == nil || k.models[model] }

// rateLimited refuses a request over its key's rate: 429, Retry-After the
// wait rounded up to a second.
type rateLimited struct {
	key  string
	wait time.Duration
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("key %q is over its rate; retry in %v", e.key, e.wait.Round(time.Millisecond))
}

// retryAfter is the wait in whole seconds, at least 1.
func (e *rateLimited) retryAfter() int { return max(1, int(math.Ceil(e.wait.Seconds()))) }

// apiKeyKey is the context key of a request's *apiKey (auth and grpcTap
// set it).
type apiKeyKey struct{}

// withKey returns ctx carrying the request's key, and gives the request's
// info (for its log record and metrics) the key's name.
func withKey(ctx context.Context, k *apiKey) context.Context {
	if ri := requestInfo(ctx); ri != nil {
		ri.key = k
	}
	return context.WithValue(ctx, apiKeyKey{}, k)
}

// keyOf returns the request's key, nil when the server asks for none.
func keyOf(ctx context.Context) *apiKey {
	k, _ := ctx.Value(apiKeyKey{}).(*apiKey)
	return k
}

// keyName is the name of the request's key, "" for none.
func keyName(ri *reqInfo) string {
	if ri == nil || ri.key == nil {
		return ""
	}
	return ri.key.Name
}

// checkModel refuses a model the request's key may not use: 403.
func checkModel(ctx context.Context, model string) error {
	if k := keyOf(ctx); k != nil && !k.allows(model) {
		return withStatus(http.StatusForbidden, "key %q may not use model %q", k.Name, model)
	}
	return nil
}
