//go:build tools

// Package tools records the command this module exists to build, so that `go mod tidy` keeps
// helm.sh/helm/v3 and everything cmd/helm imports in go.mod and go.sum.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
