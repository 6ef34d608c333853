// Wrapper module that builds grpc_health_probe at one pinned release (hack/tools.sh reads the
// version from the require line below): the probe OLM's catalog pods run
// (`grpc_health_probe -addr=:50051`), which the opm image carries in /bin
// (hack/images/opm/Dockerfile). v0.4.53 is the version operator-registry v1.73.0 (the opm pin)
// requires, which its release puts in the opm image.
module memcached-operator/hack/grpc-health-probe

// The go line of github.com/grpc-ecosystem/grpc-health-probe v0.4.53's go.mod.
go 1.25.0

require github.com/grpc-ecosystem/grpc-health-probe v0.4.53

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/go-jose/go-jose/v4 v4.1.4 // indirect
	github.com/spiffe/go-spiffe/v2 v2.8.1 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260226221140-a57be14db171 // indirect
	google.golang.org/grpc v1.81.1 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
