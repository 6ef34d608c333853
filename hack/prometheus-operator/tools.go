//go:build tools

// Package tools records the commands this module exists to build, so that `go mod tidy` keeps
// github.com/prometheus-operator/prometheus-operator and their imports in go.mod and go.sum.
// hack/tools.sh builds them with
// `go build -o DIR/prometheus-operator github.com/prometheus-operator/prometheus-operator/cmd/operator`
// and `go build -o DIR/prometheus-config-reloader .../cmd/prometheus-config-reloader`.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
)
