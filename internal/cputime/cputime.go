// Package cputime reads the CPU time the process has used, for the
// benchmarks and simulations that report CPU per message.
package cputime
