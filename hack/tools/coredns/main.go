// Command coredns is CoreDNS v1.15.0 with only the plugins the test ground's Corefile uses
// (errors, health, ready, kubernetes, cache, loop): the full build links every cloud
// provider's SDK and costs minutes more to compile on a fresh machine.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
