//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps github.com/prometheus/memcached_exporter and its imports in go.mod and
// go.sum. hack/tools.sh builds it with
// `go build -o DIR/memcached_exporter github.com/prometheus/memcached_exporter/cmd/memcached_exporter`.
package tools

import (
	_ "github.com/prometheus/memcached_exporter/cmd/memcached_exporter"
)
