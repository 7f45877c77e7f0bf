// Command pause blocks until SIGTERM or SIGINT, then exits 0. `make cluster`
// (hack/cluster) builds two images from it: the node's pod sandbox image
// (the role of Kubernetes' pause, which is C and not in its Go module) and
// the stand-in for Fleet's containers, so that the Deployment controller
// rolls real pods of Fleet's Deployments without Fleet.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
