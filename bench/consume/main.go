package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "consume:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "", "bootstrap servers, comma-separated")
	topic := flag.String("topic", "", "the topic to read")
	partitions := flag.Int("partitions", 0, "read partitions 0 to this, less one")
	records := flag.Int("records", 0, "stop once this many records are read")
	maxBytes := flag.Int("max-bytes", 64<<20, "a Fetch response's limit (fetch.max.bytes)")
	partMax := flag.Int("partition-max-bytes", 8<<20, "a partition's limit in a Fetch (max.partition.fetch.bytes)")
	flag.Parse()
	if *brokers == "" || *topic == "" || *partitions < 1 || *records < 1 || *maxBytes < 1 || *partMax < 1 {
		return fmt.Errorf("want -brokers, -topic, -partitions ≥ 1, -records ≥ 1 and positive limits; got %q %q %d %d %d %d",
			*brokers, *topic, *partitions, *records, *maxBytes, *partMax)
	}
	offs := map[int32]kgo.Offset{}
	for p := range *partitions {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: offs}),
		kgo.FetchMaxBytes(int32(*maxBytes)), kgo.FetchMaxPartitionBytes(int32(*partMax)))
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	defer cl.Close()
	ctx := context.Background()
	// A line as the first record is read and as each quarter is passed,
	// timed by the benchmark as it reads them, as it times the binary's
	// (runBinary): where in the copy the two part ways.
	quarter := 1
	for n := 0; n < *records; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("reading %s after %d records: %w", *topic, n, err)
		}
		if n == 0 && fs.NumRecords() > 0 {
			fmt.Println("first")
		}
		n += fs.NumRecords()
		for ; quarter < 4 && n*4 >= *records*quarter; quarter++ {
			fmt.Println("quarter", quarter)
		}
	}
	fmt.Println("done")
	return nil
}
