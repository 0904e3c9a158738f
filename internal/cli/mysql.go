package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/internal/resources"
)

// clientRunner runs the mysql client in an instance's mysqld container wired to the user's
// streams: a session on a terminal (tty), or a batch reading stdin.
type clientRunner interface {
	Client(ctx context.Context, pod *corev1.Pod, args []string, streams genericiooptions.IOStreams, tty bool) error
}

// sessionScript runs the client with the user's arguments, as root over the local socket;
// the password stays in the container's environment.
var sessionScript = `MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql --no-defaults --protocol=socket --socket=` +
	resources.SocketPath + ` -uroot "$@"`

// Client runs the session until the client exits. It has no deadline of its own: the user
// ends it (the connection's setup is bounded by the request timeout).
func (p *podExec) Client(ctx context.Context, pod *corev1.Pod, args []string, s genericiooptions.IOStreams, tty bool) error {
	exec, err := p.executor(pod, &corev1.PodExecOptions{Container: resources.ContainerMySQL,
		Command: append([]string{"sh", "-c", sessionScript, "sh"}, args...),
		Stdin:   true, Stdout: true, Stderr: !tty, TTY: tty})
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdin: s.In, Stdout: s.Out, Tty: tty}
	if !tty {
		opts.Stderr = s.ErrOut
	} else if in, ok := s.In.(*os.File); ok {
		// Raw mode while the session runs: keys go to the client as typed (Ctrl-C cancels
		// its statement, not this command), and the terminal is restored after.
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("while setting up the terminal: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), state) }()
		opts.TerminalSizeQueue = &fixedSize{fd: int(in.Fd())}
	}
	return exec.StreamWithContext(ctx, opts)
}

// fixedSize tells the remote terminal the local one's size once, at the start.
type fixedSize struct {
	fd   int
	sent bool
}

func (f *fixedSize) Next() *remotecommand.TerminalSize {
	if f.sent {
		return nil
	}
	f.sent = true
	w, h, err := term.GetSize(f.fd)
	if err != nil {
		return nil
	}
	return &remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
}

func newMySQLCommand(o *options) *cobra.Command {
	var instance string
	cmd := &cobra.Command{
		Use:   "mysql CLUSTER [--instance INSTANCE] [-- MYSQL-ARGS...]",
		Short: "Open the mysql client on the primary (or an instance), as root over its local socket",
		Long: "mysql runs the mysql client in the mysqld container of the cluster's primary (or of\n" +
			"--instance) through pods/exec, as root over the local socket, with the arguments after\n" +
			"--. On a terminal it is an interactive session; otherwise it reads statements from\n" +
			"stdin (kubectl dolphin mysql db < script.sql) or runs -e. When the client fails\n" +
			"(an SQL error), it says why and this command exits 1.",
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if (dash == -1 && len(args) != 1) || (dash != -1 && dash != 1) {
				return usageErrorf("want the CLUSTER, then the client's arguments after --")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.mysql(cmd.Context(), args[0], instance, args[1:])
		},
	}
	cmd.Flags().StringVar(&instance, "instance", "", "the instance (pod) to connect to; default: the primary")
	return cmd
}

func (o *options) mysql(ctx context.Context, cluster, instance string, args []string) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, cluster)
	if err != nil {
		return err
	}
	if instance == "" {
		if instance = c.Status.CurrentPrimary; instance == "" {
			return withCode(ExitRefused, "%s has no primary the operator knows of: name an instance with --instance", cluster)
		}
	} else if err := isInstance(c, instance); err != nil {
		return err
	}
	pod := &corev1.Pod{}
	if err := o.client.Get(rctx, client.ObjectKey{Namespace: c.Namespace, Name: instance}, pod); err != nil {
		return apiError("get", "pods", c.Namespace, instance, err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return withCode(ExitRefused, "%s is %s, not Running: its mysqld cannot be reached", instance, pod.Status.Phase)
	}
	in, _ := o.io.In.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd())) && isTerminal(o.io.Out)
	err = o.shell.Client(ctx, pod, args, o.io, tty)
	var exit utilexec.CodeExitError
	switch {
	case errors.As(err, &exit):
		// The client said why on stderr; its own code (1 for an SQL error) is not one of ours.
		return fmt.Errorf("the mysql client in %s exited with %d", instance, exit.Code)
	case err != nil && (apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: User ")):
		return withCode(ExitForbidden, "refused: you may not exec into %s (RBAC: grant the verb \"create\" on \"pods/exec\"): %w", instance, err)
	case err != nil:
		return fmt.Errorf("the session with %s: %w", instance, err)
	}
	return nil
}
