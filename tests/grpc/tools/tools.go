//go:build tools

// Package tools pins grpcurl and ghz, the gRPC command-line client and load generator that
// tests/http2.zig runs against examples/grpc-echo, and the versions of their dependencies, so
// tests/tools can build both with the Go it installs (Go 1.23 from Debian's bookworm-backports).
package tools

import (
	_ "github.com/bojand/ghz/cmd/ghz"
	_ "github.com/fullstorydev/grpcurl/cmd/grpcurl"
)
