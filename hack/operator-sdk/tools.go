//go:build tools

// Package tools records the commands this module exists to build (operator-sdk, and the
// binary of scorecard's test image), so that `go mod tidy` keeps
// github.com/operator-framework/operator-sdk and their imports in go.mod and go.sum.
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
	_ "github.com/operator-framework/operator-sdk/images/scorecard-test"
)
