//go:build tools

// Package tools records the commands this module exists to build, so that
// `go mod tidy` keeps k8s.io/kubernetes and everything they import in go.mod
// and go.sum. hack/tools.sh builds them with
// `go build -o DIR k8s.io/kubernetes/cmd/kube-apiserver ...`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
