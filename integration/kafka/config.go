package kafka

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Layout is the shape of a test cluster.
type Layout int

const (
	// Combined is three nodes, each broker and controller (node ids 1-3).
	// Killing one keeps the metadata quorum; killing two loses it.
	Combined Layout = iota
	// Isolated is one controller-only node (id 100) and three brokers
	// (ids 1-3), so two brokers can be down at once and elections still
	// happen (docs/testing.md §6.4).
	Isolated
)

func (l Layout) String() string {
	if l == Isolated {
		return "isolated (1 controller + 3 brokers)"
	}
	return "combined (3 broker+controller nodes)"
}

// ControllerID is the node id of the controller in the Isolated layout.
const ControllerID = 100

// baseConfig is the per-node tuning of docs/testing.md §6.3 and §6.5: RF 3
// internal topics so a killed broker does not stop them, fast fencing and ISR
// shrink, no automatic preferred-leader moves, periodic unclean elections for
// topics that allow them, and small buffers for a 2-core machine.
var baseConfig = map[string]string{
	"inter.broker.listener.name":                       "PLAINTEXT",
	"controller.listener.names":                        "CONTROLLER",
	"listener.security.protocol.map":                   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
	"offsets.topic.replication.factor":                 "3",
	"offsets.topic.num.partitions":                     "3",
	"transaction.state.log.replication.factor":         "3",
	"transaction.state.log.min.isr":                    "2",
	"transaction.state.log.num.partitions":             "3",
	"share.coordinator.state.topic.replication.factor": "3",
	"share.coordinator.state.topic.min.isr":            "2",
	"group.initial.rebalance.delay.ms":                 "0",
	"num.partitions":                                   "1",
	"auto.create.topics.enable":                        "false",
	"log.cleaner.dedupe.buffer.size":                   "2097152",
	"auto.leader.rebalance.enable":                     "false",
	"broker.session.timeout.ms":                        "4000",
	"broker.heartbeat.interval.ms":                     "1000",
	"replica.lag.time.max.ms":                          "4000",
	"unclean.leader.election.interval.ms":              "1000",
	"num.network.threads":                              "2",
	"num.io.threads":                                   "4",
	"num.recovery.threads.per.data.dir":                "1",
	"log.flush.offset.checkpoint.interval.ms":          "1000",
}

// newClusterID makes a KRaft cluster id as StorageTool random-uuid prints it:
// 16 random bytes, URL-safe base64 without padding.
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// freePorts reserves n distinct loopback ports. Listeners are held until all
// are chosen so the kernel never hands the same port out twice; Kafka needs
// fixed ports because the voters line names them (docs/testing.md §6.3).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeProperties writes a Java properties file with sorted keys.
func writeProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing node config %s: %w", path, err)
	}
	return nil
}

// nodeProps builds one node's configuration.
func nodeProps(n *Node, voters string, overrides map[string]string) map[string]string {
	p := make(map[string]string, len(baseConfig)+len(overrides)+8)
	for k, v := range baseConfig {
		// The share-group coordinator (KIP-932) arrived in 4.0; 3.9 does
		// not know its keys and would log them as unused.
		if n.rel.before(4, 0) && strings.HasPrefix(k, "share.coordinator.") {
			continue
		}
		p[k] = v
	}
	p["node.id"] = fmt.Sprint(n.ID)
	p["controller.quorum.voters"] = voters
	p["log.dirs"] = filepath.Join(n.Dir, "data")
	switch {
	case n.broker && n.controller:
		p["process.roles"] = "broker,controller"
		p["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.Port, n.ControllerPort)
		p["advertised.listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port)
	case n.broker:
		p["process.roles"] = "broker"
		p["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port)
		p["advertised.listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port)
	default:
		p["process.roles"] = "controller"
		p["listeners"] = fmt.Sprintf("CONTROLLER://127.0.0.1:%d", n.ControllerPort)
		p["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
		delete(p, "inter.broker.listener.name")
	}
	for k, v := range overrides {
		p[k] = v
	}
	return p
}
