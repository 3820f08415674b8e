package allocate

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"slices"
	"strconv"
)

// ConsistentHash is CONSISTENT_HASH (AllocateMessageQueueConsistentHash):
// each client puts virtualNodes points on a hash ring, and a queue goes
// to the client owning the first point at or after the queue's hash,
// wrapping around. Zero means DefaultVirtualNodes; a negative count
// panics.
//
// The hash is RocketMQ's default: the first four bytes of the MD5 digest
// of the text, read big-endian. Points are hashed from "clientID-i"
// (i from 0) and queues from Queue.String, so for ASCII names the ring
// matches RocketMQ's Java clients. MD5 serves here as a stable, well
// spread function, not for security.
func ConsistentHash(virtualNodes int) Strategy {
	if virtualNodes < 0 {
		panic("allocate: negative virtual node count")
	}
	if virtualNodes == 0 {
		virtualNodes = DefaultVirtualNodes
	}
	return consistentHash{virtualNodes}
}

var defaultHash = ConsistentHash(0)

type consistentHash struct{ vnodes int }

func (consistentHash) Name() string { return NameConsistentHash }

// ringHash is RocketMQ's MD5Hash.hash.
func ringHash(s string) uint32 {
	d := md5.Sum([]byte(s))
	return binary.BigEndian.Uint32(d[:4])
}

type point struct {
	hash   uint32
	client int // index into the sorted clients
}

func (s consistentHash) Allocate(_, clientID string, clients []string, queues []Queue) ([]Queue, error) {
	cs, qs, idx, err := prepare(clientID, clients, queues)
	if err != nil {
		return nil, err
	}
	ring := make([]point, 0, len(cs)*s.vnodes)
	for i, c := range cs {
		for v := range s.vnodes {
			ring = append(ring, point{ringHash(c + "-" + strconv.Itoa(v)), i})
		}
	}
	// RocketMQ keeps the ring in a TreeMap filled in client order, so of
	// two points with one hash the later insertion wins: sort stably and
	// keep the last of each run.
	slices.SortStableFunc(ring, func(a, b point) int { return cmp.Compare(a.hash, b.hash) })
	uniq := ring[:0]
	for i, p := range ring {
		if i+1 < len(ring) && ring[i+1].hash == p.hash {
			continue
		}
		uniq = append(uniq, p)
	}
	ring = uniq
	out := []Queue{}
	for _, q := range qs {
		h := ringHash(q.String())
		j, _ := slices.BinarySearchFunc(ring, h, func(p point, h uint32) int { return cmp.Compare(p.hash, h) })
		if j == len(ring) {
			j = 0
		}
		if ring[j].client == idx {
			out = append(out, q)
		}
	}
	return out, nil
}
