//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps github.com/grpc-ecosystem/grpc-health-probe and its imports
// in go.mod and go.sum. hack/tools.sh builds it with
// `go build -o DIR/grpc_health_probe github.com/grpc-ecosystem/grpc-health-probe`.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
)
