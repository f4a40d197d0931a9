package remote

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// WithRetries retries a request up to n more times when it did not get an
// answer from a model — the connection failed (refused, reset, closed
// before the answer) or the server or a load balancer in front of it
// answered 502, 503 or 429 — with a growing, jittered pause between tries
// (50 ms doubling to 1 s, or the answer's Retry-After up to 5 s), until the
// call's context ends. Every call of a Client is idempotent — an infer
// request is a pure function of its inputs, the rest are reads — so a
// request that did reach a replica that then died runs again elsewhere
// with the same answer. Streams are not retried: a session that breaks
// ends with its error. Without the option (n = 0) a call fails at its
// first failure.
func WithRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return errors.New("remote: negative retries")
		}
		c.retries = n
		return nil
	}
}

// retry reports whether a request that ended with resp or err should be
// sent again, and waits the pause before it; it closes a resp it
// discards.
func (c *Client) retry(ctx context.Context, attempt int, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	wait := backoff(attempt)
	switch {
	case err != nil:
		// A transport error: nothing was answered.
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusTooManyRequests:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, maxRetryAfter)
		}
	default:
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false // the caller answers with resp or err
	}
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	return true
}

// maxRetryAfter caps the pause a Retry-After header asks for.
const maxRetryAfter = 5 * time.Second

// backoff is the pause before try attempt+1: 50 ms doubling to 1 s, with
// up to half of it added at random so that clients that failed together
// do not come back together.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 5)
	d = min(d, time.Second)
	return d + rand.N(d/2+1)
}
