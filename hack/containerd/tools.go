//go:build tools

// Package tools records the commands this module exists to build, so that
// `go mod tidy` keeps github.com/containerd/containerd/v2 and their imports in
// go.mod and go.sum. hack/tools.sh builds them with
// `go build -o DIR github.com/containerd/containerd/v2/cmd/containerd ...`.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
