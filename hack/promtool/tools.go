//go:build tools

// Package tools records the commands this module exists to build, so that
// `go mod tidy` keeps github.com/prometheus/prometheus and their imports in go.mod and go.sum.
// hack/tools.sh builds them with
// `go build -o DIR/promtool github.com/prometheus/prometheus/cmd/promtool` and
// `go build -o DIR/prometheus github.com/prometheus/prometheus/cmd/prometheus`.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
