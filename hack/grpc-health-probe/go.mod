// Wrapper module that builds grpc_health_probe at one pinned release (hack/tools.sh reads the
// version from the require line below): the probe OLM's catalog pods run
// (`grpc_health_probe -addr=:50051`), which the opm image carries in /bin
// (hack/images/opm/Dockerfile).
module memcached-operator/hack/grpc-health-probe

// The go line of github.com/grpc-ecosystem/grpc-health-probe v0.4.62's go.mod.
go 1.26.0

require github.com/grpc-ecosystem/grpc-health-probe v0.4.62

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/go-jose/go-jose/v4 v4.1.6 // indirect
	github.com/spiffe/go-spiffe/v2 v2.9.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
