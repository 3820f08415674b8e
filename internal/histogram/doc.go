// Package histogram counts values in fixed buckets with atomics only, so
// the core packages can keep a latency or size distribution that a
// metrics exporter reads at scrape time, without importing one. Observe
// costs a short search over the bounds and two atomic adds; it never
// allocates and never locks.
package histogram
