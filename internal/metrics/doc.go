// Package metrics exposes the broker's figures to Prometheus. The core
// packages and the plugins import no metrics library: they keep atomic
// counters and fixed-bucket histograms (internal/histogram) and hand out
// snapshots (store.Stats, broker.Metrics, wasm.Plugin.Stats,
// natsbridge.Bridge.Status). The collector here reads those snapshots
// when Prometheus scrapes, so a scrape pays for the series, not each
// message.
//
// # Cardinality
//
// Label values that clients choose — topics and consumer groups — are
// capped: at most Options.MaxTopics topics and Options.MaxGroups groups
// get their own series; the rest are summed into topic="_other" or
// group="_other". A name keeps its series once it has one (so a counter
// does not jump between series), until it disappears from the broker.
// Lag series, one per group, topic and queue, are capped at
// Options.MaxLagSeries; past it a group's remaining lag is summed into
// topic="_other", queue="_all". rmq_metrics_folded counts the names
// folded at the last scrape.
package metrics
