// Command outside is a program in a module of its own that imports the
// public worker library, as a user's program does. The test in
// sequence/module_test.go builds it against this checkout and runs it; its
// function takeOrders is the README's library example, word for word.
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
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := takeOrders(ctx, strings.Split(*servers, ","), *root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// README begin
func takeOrders(ctx context.Context, servers []string, root string) error {
	zc, err := zkclient.Dial(ctx, servers, zkclient.Options{})
	if err != nil {
		return err
	}
	defer zc.Close()
	seqs, err := sequence.NewClient(zc, sequence.Options{Root: root})
	if err != nil {
		return err
	}
	// Registers "orders" unless it exists; 'seqkeeper serve' initialises it.
	if _, err := seqs.Create(ctx, "orders", sequence.CreateOptions{}); err != nil {
		return err
	}
	ids, err := seqs.Take(ctx, "orders", 3) // a batch, e.g. 1:3
	if err != nil {
		return err
	}
	fmt.Println(ids)

	alloc, err := sequence.NewAllocator(seqs, "orders", sequence.AllocatorOptions{})
	if err != nil {
		return err
	}
	defer alloc.Close(ctx)     // pushes unused IDs back
	id, err := alloc.Next(ctx) // one at a time, from memory
	if err != nil {
		return err
	}
	fmt.Println(id)
	return nil
}

// README end
