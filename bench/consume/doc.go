// Command consume is BenchmarkReplica's consumer as a process of its own:
// a franz-go consumer that reads given partitions of a topic from their
// start, drops the records, and prints "first" once it has read its first
// records, "quarter 1" to "quarter 3" as it passes each quarter of them,
// and "done" once it has read as many as it was told to. Run from a fresh exec, it pays what any consumer a user
// starts pays, and the kfollower binary pays too: the program's start, its
// first connections and metadata, and the first touch of the memory its
// Fetch responses are read into, none of which a consumer inside the
// benchmark's warm process pays again.
//
//	consume -brokers host:port,... -topic t -partitions 8 -records 1048576 \
//	        -max-bytes 67108864 -partition-max-bytes 8388608
package main
