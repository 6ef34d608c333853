// Wrapper module that pins github.com/prometheus-operator/prometheus-operator, from which
// hack/tools.sh copies the real CRD of monitoring.coreos.com's ServiceMonitor for the tests of
// the ServiceMonitors the operator writes (spec.monitoring.serviceMonitor). Nothing is built:
// `go mod download -json` fetches the module through the proxy, checked against go.sum, and
// the CRD file is copied out.
module memcached-operator/hack/prometheus-operator

// The go line of github.com/prometheus-operator/prometheus-operator v0.85.0's go.mod.
go 1.24.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
