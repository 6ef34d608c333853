// Wrapper module that pins github.com/openshift/api, from which hack/tools.sh copies the real
// CRD of OpenShift's apiservers.config.openshift.io (the cluster's TLS security profile) for
// the end-to-end tests. Nothing is built: `go mod download -json` fetches the module through
// the proxy, checked against go.sum and the checksum database, and the CRD file is copied out.
//
// openshift/api has no recent tags, and the proxy refuses @master; a pseudo-version another
// module requires is served. This is the one OLM v0.46.0 requires (hack/olm/go.mod).
module memcached-operator/hack/openshift-api

// The go line of github.com/openshift/api at that version.
go 1.24.0

require github.com/openshift/api v0.0.0-20260204104751-e09e5a4ebcd0
