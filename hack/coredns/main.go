// Command coredns is CoreDNS at the version hack/coredns/go.mod pins, with the in-tree plugins
// the local cluster's Corefile uses (hack/node/coredns.yaml) and no others: what CoreDNS's own
// plugin.cfg does for a custom build, without its code generation. Upstream's coredns.go
// imports every in-tree plugin, and with them the cloud SDKs of route53, azure and clouddns:
// most of the build time, for plugins a one-node cluster on loopback never loads.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the order in which a server block's plugins handle a query: the order of
// these names in CoreDNS's plugin.cfg.
var directives = []string{
	"reload",
	"ready",
	"health",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
	"loop",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
