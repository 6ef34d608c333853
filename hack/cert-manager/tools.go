//go:build tools

// Package tools records the commands this module exists to build, so that `go mod tidy`
// keeps github.com/cert-manager/cert-manager and everything they import in go.mod and go.sum.
// hack/tools.sh builds cmd/controller and cmd/cainjector, and hack/extractcrd, the program
// cert-manager's release uses to pick the CRDs out of its rendered chart.
package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
	_ "github.com/cert-manager/cert-manager/cmd/controller"
	_ "github.com/cert-manager/cert-manager/hack/extractcrd"
)
