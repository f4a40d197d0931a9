package remote

import (
	"context"
	"time"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// SetEndWait sets how long a session waits for the end event after its
// last chunk; the returned func restores it. Not for parallel tests.
func SetEndWait(d time.Duration) (restore func()) {
	old := endWait
	endWait = d
	return func() { endWait = old }
}

// OpenSessionsWith makes c open its sessions' connections with open
// instead of its transport's; the rest of its transport is unchanged.
func OpenSessionsWith(c *Client, open func(ctx context.Context, start *oip.InferenceRequest) (conn oip.SessionConn, keep func(), err error)) {
	c.t = sessionsFrom{c.t, open}
}

// sessionsFrom is a transport whose sessions open elsewhere.
type sessionsFrom struct {
	transport
	open func(context.Context, *oip.InferenceRequest) (oip.SessionConn, func(), error)
}

func (s sessionsFrom) openSession(ctx context.Context, start *oip.InferenceRequest) (oip.SessionConn, func(), error) {
	return s.open(ctx, start)
}
