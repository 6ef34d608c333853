// Wrapper module that builds sigs.k8s.io/kustomize/kustomize/v5 at one pinned release.
// A wrapper module like the other tools (instead of `go install pkg@version`) keeps every pin and checksum in this repository. v5.8.3 declares go 1.27.0, newer than the Go this project uses.
// Built by hack/tools.sh, which reads the version below.
module memcached-operator/hack/kustomize

// The go line of sigs.k8s.io/kustomize/kustomize/v5 v5.8.2.
go 1.26.0

require sigs.k8s.io/kustomize/kustomize/v5 v5.8.2
