// Command seqkeeper is the seqkeeper daemon and operator CLI.
//
// One binary carries every role: "seqkeeper serve" runs a replica (leader
// election, the primary's reservation loop, the HTTP ID API) and the other
// subcommands are the operator tools (docs/cli.md). Exit codes: 0 ok, 1
// failure, 2 usage or configuration error, 3 (verify) ZooKeeper lost sequences
// that no one has re-created yet.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// SIGINT and SIGTERM cancel the commands' context: operator commands
	// stop waiting for ZooKeeper, serve shuts down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, defaultGlobals(), os.Args[1:])
	stop()
	os.Exit(code)
}

// commands are seqkeeper's subcommands, in the order help lists them.
func commands(g *globals) []*cobra.Command {
	return []*cobra.Command{
		newVersionCmd(g),
		newCreateCmd(g),
		eachRoot(g, newListCmd(g)),
		newDescribeCmd(g),
		newTakeCmd(g),
		newPushCmd(g),
		newDeleteCmd(g),
		eachRoot(g, newLeaderCmd(g)),
		eachRoot(g, newStatusCmd(g)),
		newStepDownCmd(g),
		newBenchCmd(g),
		newServeCmd(g),
		eachRoot(g, newVerifyCmd(g)),
		newRestoreCmd(g),
		newAdvanceCmd(g),
		newWidenCmd(g),
		newAdoptCmd(g),
		newExportCmd(g),
		newImportCmd(g),
		newACLCmd(g),
	}
}
