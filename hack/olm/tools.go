//go:build tools

// Package tools records the commands this module exists to build, so that
// `go mod tidy` keeps github.com/operator-framework/operator-lifecycle-manager and
// everything they import in go.mod and go.sum. hack/tools.sh builds them with
// `go build -tags json1 -o DIR .../cmd/olm .../cmd/catalog .../util/cpb` (cpb is the
// bundle copier of OLM's util image, which bundle-unpack Jobs run).
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
)
