package zkclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// hostProvider is go-zookeeper's DNSHostProvider, except that a server
// name that does not resolve is left out while another one does: in
// Kubernetes a ZooKeeper pod being replaced has no DNS record for a while,
// and go-zookeeper's own provider then refuses every name. Names are
// resolved when a connection starts (Init), as go-zookeeper does.
type hostProvider struct {
	// skipped is told about each name left out.
	skipped func(server string, err error)

	mu         sync.Mutex
	servers    []string
	curr, last int
}

// lookupTimeout bounds the resolution of all the names.
const lookupTimeout = 3 * time.Second

// Init resolves the servers' names, leaving out those that do not
// resolve; it fails only when none does.
func (h *hostProvider) Init(servers []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	var found []string
	var errs []error
	for _, s := range servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return err
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			errs = append(errs, err)
			if h.skipped != nil {
				h.skipped(s, err)
			}
			continue
		}
		for _, a := range addrs {
			found = append(found, net.JoinHostPort(a, port))
		}
	}
	if len(found) == 0 {
		return errors.Join(errs...)
	}
	rand.Shuffle(len(found), func(i, j int) { found[i], found[j] = found[j], found[i] })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers, h.curr, h.last = found, -1, -1
	return nil
}

// Len is the number of server addresses.
func (h *hostProvider) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// Next returns the next address to try; retryStart is true once every
// address was tried since the last successful connection.
func (h *hostProvider) Next() (server string, retryStart bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.curr = (h.curr + 1) % len(h.servers)
	retryStart = h.curr == h.last
	if h.last == -1 {
		h.last = 0
	}
	return h.servers[h.curr], retryStart
}

// Connected records that the current address answered.
func (h *hostProvider) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = h.curr
}
