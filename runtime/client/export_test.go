package client

// ItemCheckInterval is itemCheckInterval for the external tests: how many
// items a batch's loops may prepare between two looks at the context.
const ItemCheckInterval = itemCheckInterval

// SessionsWaiting is the number of steps waiting in the sessions' queue of
// task taskID (a session-batched task) of c's loaded model.
func SessionsWaiting(c *Client, taskID string) int {
	l := c.current()
	if l == nil {
		return 0
	}
	for i := range c.spec.Tasks {
		if c.spec.Tasks[i].TaskID != taskID {
			continue
		}
		if q := l.stepsOf(i); q != nil {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.waiting)
		}
	}
	return 0
}
