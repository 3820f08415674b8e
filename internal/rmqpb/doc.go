// Package rmqpb is the generated Go code of RocketMQ 5's gRPC protocol,
// package apache.rocketmq.v2: the messages, enums and MessagingService
// that the 5.x clients speak. proto/ holds service.proto and
// definition.proto as published (the rocketmq-client-nodejs 1.0.8 package
// ships them), unchanged; the Go package is given on protoc's command line
// so the files stay verbatim.
//
// The generated files are committed, so a build needs no protoc. go
// generate reruns generate.sh with the pinned generators
// (protoc-gen-go v1.36.12, protoc-gen-go-grpc v1.6.2) and the system's
// protoc; TestGenerated checks the committed code is current where protoc
// is installed.
package rmqpb

//go:generate sh generate.sh
