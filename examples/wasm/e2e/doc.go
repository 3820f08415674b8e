// Package e2e holds the end-to-end tests of WASM plugins in a running
// broker: a broker started with a plugin list, the official RocketMQ Go
// client subscribing with a plugin's expression type, reloads under
// traffic, a failing filter holding its subscription, and the allocate
// admin command. The example modules are built from source by the tests;
// testdata/classfold is a second class filter the tests reload to.
package e2e
