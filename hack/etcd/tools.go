//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps go.etcd.io/etcd/server/v3 and its imports in go.mod and
// go.sum. hack/tools.sh builds it with `go build -o DIR go.etcd.io/etcd/server/v3`.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
