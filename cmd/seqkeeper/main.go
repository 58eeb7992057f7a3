// Command seqkeeper is the seqkeeper daemon and operator CLI.
//
// One binary carries every role: "seqkeeper serve" runs a replica (leader
// election, the primary's reservation loop, the HTTP ID API) and the other
// subcommands are the operator tools. See docs/architecture.md.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "seqkeeper:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		os.Exit(2)
	}
	os.Exit(1)
}
