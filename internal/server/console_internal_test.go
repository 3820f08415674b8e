package server

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.1.2.3:0": true,
		":8080": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false, "": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
