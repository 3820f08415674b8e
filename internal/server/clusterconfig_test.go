package server

import (
	"testing"
	"time"
)

// TestClusterRetentionConfig reads the raft log's retention keys, the
// size with its unit.
func TestClusterRetentionConfig(t *testing.T) {
	var c Config
	err := c.decode([]byte("cluster: {setName: s, nodeId: a, peers: [{id: a, addr: '127.0.0.1:7000'}], trailingDuration: 5m, trailingBytes: 2GiB}\n"), "")
	if err != nil || c.Cluster == nil || c.Cluster.TrailingDuration != 5*time.Minute || c.Cluster.TrailingBytes != 2<<30 {
		t.Fatalf("%v %+v", err, c.Cluster)
	}
}
