// Wrapper module that builds github.com/operator-framework/operator-sdk/cmd/operator-sdk at one pinned release.
// `go install pkg@version` cannot be used: it asks the module proxy for the version list (for deprecation notices), which the proxy this project uses refuses for this module; a wrapper module builds the same thing from the module's own requirements and keeps the checksums in go.sum.
// Built by hack/tools.sh, which reads the version below.
module memcached-operator/hack/operator-sdk

// The go line of github.com/operator-framework/operator-sdk v1.42.3.
go 1.26.3

require github.com/operator-framework/operator-sdk v1.42.3
