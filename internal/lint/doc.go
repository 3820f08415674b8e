// Package lint holds the module's architecture test: the import rules of
// DESIGN.md §1 (which package may import which), checked on every non-test
// Go file. It has no code of its own.
package lint
