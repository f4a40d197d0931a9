package remote

import "time"

// SetEndWait sets how long a session waits for the end event after its
// last chunk; the returned func restores it. Not for parallel tests.
func SetEndWait(d time.Duration) (restore func()) {
	old := endWait
	endWait = d
	return func() { endWait = old }
}
