// Command seqkeeper is the seqkeeper daemon and operator CLI.
//
// One binary carries every role: "seqkeeper serve" runs a replica (leader
// election, the primary's reservation loop, the HTTP ID API) and the other
// subcommands are the operator tools (docs/cli.md). Exit codes: 0 ok, 1
// failure, 2 usage or configuration error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT and SIGTERM cancel the commands' context: operator commands
	// stop waiting for ZooKeeper, serve shuts down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, defaultGlobals(), os.Args[1:])
	stop()
	os.Exit(code)
}
