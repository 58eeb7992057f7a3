package zkclient

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// ValidateRoot checks a root path such as "/all-sequences": absolute, no
// trailing slash, no empty or relative elements.
func ValidateRoot(p string) error {
	if p == "" || p[0] != '/' || p == "/" {
		return fmt.Errorf("zookeeper path %q: must be absolute and not \"/\" (for example /all-sequences)", p)
	}
	if path.Clean(p) != p {
		return fmt.Errorf("zookeeper path %q: must be clean (no trailing '/', '//', '.' or '..')", p)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("zookeeper path %q: /zookeeper is reserved by ZooKeeper", p)
	}
	return nil
}

// EnsurePath creates p and its missing ancestors, with the client's ACL.
// It creates only what does not exist: ZooKeeper checks the CREATE
// permission before existence, so a client that may read an existing path
// but not create in its parent would be refused otherwise.
func (c *Client) EnsurePath(ctx context.Context, p string) error {
	if err := ValidateRoot(p); err != nil {
		return err
	}
	if ok, _, err := c.Session().Exists(ctx, p); err == nil && ok {
		return nil
	}
	cur := ""
	for _, el := range strings.Split(p[1:], "/") {
		cur += "/" + el
		if ok, _, err := c.Session().Exists(ctx, cur); err == nil && ok {
			continue
		}
		if _, err := c.Session().Create(ctx, cur, nil, 0); err != nil && !errors.Is(err, ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}
