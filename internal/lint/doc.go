// Package lint holds the module's architecture test: the import rules of
// docs/architecture.md ("Import rules": which package may import which),
// and the tests that keep the documents true: every package go list finds
// appears in docs/architecture.md, and every relative link in README.md,
// the root's other Markdown files and docs/ leads to a file and heading
// that exist. It has no code of its own.
//
// Each rule is checked twice:
//
//  1. on every non-test Go file's own imports, whatever its build tags, so a
//     message names the file;
//  2. on every package's whole dependency graph, as `go list -deps` builds it
//     for the host and for WASM guests (GOOS=wasip1), so no package reaches a
//     forbidden one through a permitted one. A message names the shortest
//     import chain. A rule's via list names the packages a rule lets its
//     packages depend on together with their dependencies (which answer to
//     their own rules), and pending lists the violations that known work
//     removes; an entry that no longer occurs fails the test.
package lint
