//go:build tools

// Package h2spec pins the HTTP/2 conformance suite and the versions of its dependencies, so
// tests/tools can build it with Debian's Go.
package h2spec

import _ "github.com/summerwind/h2spec/cmd/h2spec"
