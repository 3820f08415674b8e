// Package broker serves the RocketMQ broker protocol over a core/store
// Store: topics, sends, long-polling pulls, consumer offsets, heartbeats and
// the consumer table.
package broker
