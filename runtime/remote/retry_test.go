package remote_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// flakyServer fails the first len(failures) requests — "reset" closes the
// connection without an answer, a status answers it — then answers every
// request with an embedding; it counts the requests.
func flakyServer(t *testing.T, failures ...string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1) - 1
		io.Copy(io.Discard, r.Body)
		if int(i) < len(failures) {
			switch f := failures[i]; f {
			case "reset":
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				conn.Close()
			case "502":
				w.WriteHeader(http.StatusBadGateway)
			case "503":
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":"the server is shutting down"}`)
			case "400":
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"bad"}`)
			}
			return
		}
		io.WriteString(w, `{"model_name":"enc","outputs":[{"name":"embedding","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`)
	}))
	t.Cleanup(hs.Close)
	return hs, &n
}

// WithRetries sends a call again after a broken connection, a 502 or a
// 503, up to its count; without it the first failure is the call's; a
// client error (400) is never retried.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	item := map[string]any{"tokens": tensor.FromInt64([]int64{4, 5}, 2)}
	run := func(hs *httptest.Server, opts ...remote.Option) error {
		rc, err := remote.New(encoderSpec(), hs.URL, append(opts, remote.WithHTTPClient(&http.Client{Transport: &http.Transport{}}))...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rc.Run(ctx, "embed", item, nil)
		return err
	}
	hs, n := flakyServer(t, "reset", "502", "503")
	if err := run(hs, remote.WithRetries(3)); err != nil || n.Load() != 4 {
		t.Errorf("3 failures, 3 retries: %v after %d requests", err, n.Load())
	}
	hs, n = flakyServer(t, "reset", "502", "503")
	var se *remote.StatusError
	if err := run(hs, remote.WithRetries(1)); !errors.As(err, &se) || se.Status != 502 || n.Load() != 2 {
		t.Errorf("3 failures, 1 retry: %v after %d requests, want the 502 after 2", err, n.Load())
	}
	hs, n = flakyServer(t, "reset")
	if err := run(hs); err == nil || n.Load() != 1 {
		t.Errorf("no retries: %v after %d requests", err, n.Load())
	}
	hs, n = flakyServer(t, "400")
	if err := run(hs, remote.WithRetries(3)); err == nil || !strings.Contains(err.Error(), "bad") || n.Load() != 1 {
		t.Errorf("a 400 with retries: %v after %d requests", err, n.Load())
	}
	if _, err := remote.New(encoderSpec(), hs.URL, remote.WithRetries(-1)); err == nil {
		t.Error("negative retries accepted")
	}
}
