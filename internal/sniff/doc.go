// Package sniff tells what a new connection speaks from its first byte
// without consuming it (MSG_PEEK), so that a port serving both TLS and
// plain clients hands a plain connection on as the connection it is: a
// wrapper that put the byte back would hide the *net.TCPConn beneath
// (its vectored writes, and what HTTP/2 servers look for on it). The
// remoting port and the gRPC endpoint share it. A leaf.
package sniff
