package seqzk

// CachedNodes is the number of znodes the client keeps a cached view of.
func (c *Client) CachedNodes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}
