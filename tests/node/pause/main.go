// The sandbox ("pause") image of the real-node tier: no registry is reachable here, so the pod sandbox
// image is built locally. It holds the pod's namespaces: it sleeps until SIGINT or SIGTERM and reaps
// any child re-parented to it (it is PID 1 of a pod sharing its PID namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
