// Package cli is kubectl-dolphin, the kubectl plugin platform teams drive Dolphin's
// clusters with: status (what the operator reports, and what each instance says over SQL
// through kubectl exec), switchover, a manual failover, fence and unfence, pause, resume,
// rotating the application password, backup, a restored cluster's manifest, a mysql client
// session and a support report. It talks to the API server only, as the
// user running it, with kubectl's own connection flags (--kubeconfig, --context, -n, ...).
//
// Every request and every wait has a deadline (but a mysql session, which its user ends),
// and every failure ends with an exit code scripts can rely on (exit.go).
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/version"
)

// requestTimeout bounds one API request when --request-timeout does not say otherwise.
const requestTimeout = 30 * time.Second

// options is what every command shares: the connection, the streams and the clock. Tests
// fill client, sql and now in; a run builds client and sql from the kubeconfig.
type options struct {
	flags *genericclioptions.ConfigFlags
	io    genericiooptions.IOStreams

	client    client.Client
	sql       sqlRunner
	shell     clientRunner
	logs      logSource
	namespace string
	now       func() time.Time
	// poll is how often a wait reads the cluster again.
	poll time.Duration
	// color: colour the status tables (a terminal, and NO_COLOR unset).
	color bool
}

// Scheme holds the kinds the plugin reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; fails only on a programming error
	}
	if err := mysqlv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Main runs the plugin with args (without the program's name) and returns its exit code.
func Main(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	o := &options{flags: genericclioptions.NewConfigFlags(true), io: streams, now: time.Now, poll: time.Second,
		color: isTerminal(streams.Out) && os.Getenv("NO_COLOR") == ""}
	return run(ctx, o, args)
}

// run runs one command line with o and prints its error, if any.
func run(ctx context.Context, o *options, args []string) int {
	cmd := newRootCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(o.io.ErrOut, "Error:", err)
	}
	return exitCode(err)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newRootCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-dolphin",
		Short: "Drive Dolphin's MySQL clusters: status, switchover, failover, fence, pause, backup, restore, mysql, report",
		Long: "kubectl dolphin shows and drives the MySQLClusters of the Dolphin operator.\n\n" +
			"Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 refused by RBAC,\n" +
			"5 timed out waiting for the operator, 6 refused by the cluster's state.",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return o.connect()
		},
	}
	root.SetOut(o.io.Out)
	root.SetErr(o.io.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%w", err) })
	o.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newStatusCommand(o), newSwitchoverCommand(o), newPauseCommand(o, true), newPauseCommand(o, false),
		newFenceCommand(o, true), newFenceCommand(o, false), newFailoverCommand(o), newRotatePasswordCommand(o),
		newBackupCommand(o), newRestoreCommand(o), newMySQLCommand(o), newReportCommand(o), newVersionCommand(o))
	return root
}

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  exactArgs(),
		// No connection needed.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		Run: func(*cobra.Command, []string) {
			fmt.Fprintf(o.io.Out, "kubectl-dolphin %s (commit %s)\n", version.Version, version.GitCommit)
		},
	}
}

// connect builds the client from the kubeconfig (once; tests set their own).
func (o *options) connect() error {
	if o.client != nil {
		return nil
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("while reading the kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("while reading the kubeconfig's namespace: %w", err)
	}
	mapper, err := o.flags.ToRESTMapper()
	if err != nil {
		return fmt.Errorf("while setting up API discovery: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme(), Mapper: mapper})
	if err != nil {
		return fmt.Errorf("while connecting to the API server: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("while connecting to the API server: %w", err)
	}
	o.client, o.namespace = c, ns
	exec := &podExec{config: rest.CopyConfig(cfg), pods: cs.CoreV1().RESTClient()}
	o.sql, o.shell, o.logs = exec, exec, &podLogs{pods: cs.CoreV1()}
	return nil
}

// exactArgs accepts exactly the arguments named, and names them when the count is wrong.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("want %d argument(s) (%v), got %d", len(names), names, len(args))
		}
		return nil
	}
}
