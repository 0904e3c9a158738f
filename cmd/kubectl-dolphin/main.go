// Command kubectl-dolphin is the kubectl plugin of the Dolphin operator (kubectl dolphin
// status, switchover, pause, resume). internal/cli holds the commands; this file only
// wires the process: its arguments, streams, interrupt and exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/dolphin-operator/dolphin/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
