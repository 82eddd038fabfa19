// Package pingpb holds the gRPC ping service that meshperf's echo server
// implements and its load generator calls. It is wire compatible with
// Fortio's fgrpc.PingServer so either tool can drive the other's server.
//
// ping.pb.go and ping_grpc.pb.go are generated; do not edit them by hand.
// Regenerate (needs protoc, protoc-gen-go and protoc-gen-go-grpc on PATH) with:
//
//	go generate ./pkg/pingpb
package pingpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative ping.proto
