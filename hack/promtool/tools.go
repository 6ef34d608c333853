//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps github.com/prometheus/prometheus and its imports in go.mod and go.sum.
// hack/tools.sh builds it with
// `go build -o DIR/promtool github.com/prometheus/prometheus/cmd/promtool`.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
