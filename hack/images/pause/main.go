// Command pause is the sandbox ("pause") container of the local test ground's pods: it holds
// the pod's namespaces, reaps the children it inherits, and exits 0 on SIGINT or SIGTERM.
// It is built static and packed into localhost/dolphin/pause by hack/images.
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
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			// Reap every exited child; -1 = any, WNOHANG = do not block.
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
