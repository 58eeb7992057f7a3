// Command outside is a program in a module of its own that imports the
// public worker library, as a user's program does. The test in
// sequence/module_test.go builds it against this checkout and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func main() {
	servers := flag.String("zk", "127.0.0.1:2181", "ZooKeeper servers, comma-separated")
	root := flag.String("root", sequence.DefaultRoot, "sequences root")
	name := flag.String("sequence", "orders", "sequence to take from")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zc, err := zkclient.Dial(ctx, strings.Split(*servers, ","), zkclient.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer zc.Close()
	seqs, err := sequence.NewClient(zc, sequence.Options{Root: *root})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ids, err := seqs.Take(ctx, *name, 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ids)
}
