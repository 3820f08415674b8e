//go:build !linux

package main

// docMain: the documents' shell blocks run on Linux only.
func docMain() (code int, ok bool) { return 0, false }
