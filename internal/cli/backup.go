package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func newBackupCommand(o *options) *cobra.Command {
	var name, method string
	var timeout time.Duration
	var wait bool
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Back a cluster up now (a MySQLBackup) and wait for the result",
		Long: "backup creates a MySQLBackup of the cluster, to the cluster's backup target, and waits\n" +
			"until the operator reports it Completed (then prints where it is, its size, GTID set\n" +
			"and how long it took) or Failed (exit 1, with the operator's reason). On a timeout the\n" +
			"backup goes on; kubectl get mysqlbackup NAME follows it.",
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := mysqlv1beta1.BackupMethod(method)
			if m != "" && m != mysqlv1beta1.BackupMethodPhysical && m != mysqlv1beta1.BackupMethodLogical {
				return usageErrorf("--method %q: want %s or %s", method, mysqlv1beta1.BackupMethodPhysical, mysqlv1beta1.BackupMethodLogical)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return o.backup(cmd.Context(), args[0], name, m, timeout, wait)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the MySQLBackup's name (default: CLUSTER-<UTC time>)")
	cmd.Flags().StringVar(&method, "method", "", "Physical (a clone of a replica) or Logical (an SQL dump); default: the operator's (Physical)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "how long to wait for the backup")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the backup is done")
	return cmd
}

func (o *options) backup(ctx context.Context, cluster, name string, method mysqlv1beta1.BackupMethod, timeout time.Duration, wait bool) error {
	start := o.now()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := o.getCluster(rctx, cluster)
	if err != nil {
		return err
	}
	if name == "" {
		name = cluster + "-" + start.UTC().Format("20060102-150405")
	}
	b := &mysqlv1beta1.MySQLBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
		Spec:       mysqlv1beta1.MySQLBackupSpec{Cluster: cluster, Method: method},
	}
	if err := o.client.Create(rctx, b); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return withCode(ExitRefused, "a MySQLBackup %s exists in %s already: name another with --name", name, c.Namespace)
		}
		return apiError("create", "mysqlbackups", c.Namespace, name, err)
	}
	fmt.Fprintf(o.io.Out, "Backup %s/%s of %s asked for.\n", c.Namespace, name, cluster)
	if !wait {
		return nil
	}
	done, err := o.waitBackup(ctx, b, start, timeout)
	if err != nil {
		return fmt.Errorf("backup %s: %w", name, err)
	}
	return o.backupResult(done, start)
}

// waitBackup reads the backup every o.poll until it is Completed or Failed, printing each
// phase it passes through.
func (o *options) waitBackup(ctx context.Context, b *mysqlv1beta1.MySQLBackup, start time.Time, timeout time.Duration) (*mysqlv1beta1.MySQLBackup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	phase := mysqlv1beta1.BackupPhase("")
	for {
		rctx, rcancel := context.WithTimeout(ctx, requestTimeout)
		got := &mysqlv1beta1.MySQLBackup{}
		err := o.client.Get(rctx, client.ObjectKeyFromObject(b), got)
		rcancel()
		switch {
		case err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, apiError("get", "mysqlbackups", b.Namespace, b.Name, err)
		case err == nil:
			if got.Status.Phase != phase {
				phase = got.Status.Phase
				fmt.Fprintf(o.io.Out, "  %6.1fs  %s%s\n", o.now().Sub(start).Seconds(), phase, backupWords(got))
			}
			if phase == mysqlv1beta1.BackupPhaseCompleted || phase == mysqlv1beta1.BackupPhaseFailed {
				return got, nil
			}
			if phase == "" && o.now().Sub(start) > operatorGrace {
				return nil, withCode(ExitTimeout, "the operator has not taken it up in %s (no status.phase): is it running?", operatorGrace)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, withCode(ExitTimeout, "not done after %s (phase %q); it goes on", timeout, phase)
			}
			return nil, ctx.Err()
		case <-time.After(o.poll):
		}
	}
}

// backupWords is the reason and message of the backup's condition that explains its phase.
func backupWords(b *mysqlv1beta1.MySQLBackup) string {
	for _, t := range []string{mysqlv1beta1.BackupConditionFailed, mysqlv1beta1.BackupConditionComplete} {
		if cond := meta.FindStatusCondition(b.Status.Conditions, t); cond != nil && cond.Status == metav1.ConditionTrue {
			return fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
		}
	}
	return ""
}

// backupResult prints a completed backup, or fails with a failed one's reason.
func (o *options) backupResult(b *mysqlv1beta1.MySQLBackup, start time.Time) error {
	if b.Status.Phase == mysqlv1beta1.BackupPhaseFailed {
		return fmt.Errorf("backup %s/%s failed%s", b.Namespace, b.Name, backupWords(b))
	}
	size := "unknown"
	if b.Status.Size != nil {
		size = b.Status.Size.String()
	}
	took := o.now().Sub(start)
	if b.Status.StartedAt != nil && b.Status.CompletedAt != nil {
		took = b.Status.CompletedAt.Sub(b.Status.StartedAt.Time)
	}
	fmt.Fprintf(o.io.Out, "Backup %s/%s Completed in %s.\n", b.Namespace, b.Name, took.Round(100*time.Millisecond))
	for _, row := range [][2]string{
		{"Method", string(b.Status.Method)}, {"Source", b.Status.Source}, {"Location", b.Status.Location},
		{"Size", size}, {"SHA-256", b.Status.SHA256}, {"GTID set", b.Status.GTIDSet}, {"MySQL", b.Status.MySQLVersion},
	} {
		if row[1] != "" {
			fmt.Fprintf(o.io.Out, "  %-9s %s\n", row[0]+":", row[1])
		}
	}
	return nil
}

func newRestoreCommand(o *options) *cobra.Command {
	var backup, targetGTID, output string
	var targetTime string
	cmd := &cobra.Command{
		Use:   "restore NEW_CLUSTER --backup BACKUP",
		Short: "Print the manifest of a new cluster restored from a backup, to a point in time if asked",
		Long: "restore prints a MySQLCluster named NEW_CLUSTER, in the backup's namespace, that the\n" +
			"operator bootstraps from the MySQLBackup (spec.bootstrap.fromBackup): the backup's\n" +
			"cluster's spec (its MySQL series, instances, storage, settings) when that cluster still\n" +
			"exists, else the backup's MySQL series and the defaults. --target-time or --target-gtid\n" +
			"recover past the backup with the cluster's binary log archive. Review it, then\n" +
			"kubectl apply -f it. Nothing is created.",
		Args: exactArgs("NEW_CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if backup == "" {
				return usageErrorf("--backup: name the MySQLBackup to restore")
			}
			if output != "yaml" && output != "json" {
				return usageErrorf("-o %q: want yaml or json", output)
			}
			target, err := restoreTarget(targetTime, targetGTID)
			if err != nil {
				return err
			}
			return o.restore(cmd.Context(), args[0], backup, target, output)
		},
	}
	cmd.Flags().StringVar(&backup, "backup", "", "the MySQLBackup to restore (in the namespace)")
	cmd.Flags().StringVar(&targetTime, "target-time", "", "recover to this time (RFC 3339, e.g. 2026-12-05T10:30:00Z)")
	cmd.Flags().StringVar(&targetGTID, "target-gtid", "", "recover up to and including this transaction (<server uuid>:<number>)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "yaml or json")
	return cmd
}

// gtidPattern is one transaction: a server UUID and a number.
var gtidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:[1-9][0-9]*$`)

// restoreTarget checks the recovery target flags: at most one, each well formed.
func restoreTarget(targetTime, targetGTID string) (*mysqlv1beta1.BootstrapFromBackup, error) {
	t := &mysqlv1beta1.BootstrapFromBackup{}
	if targetTime != "" && targetGTID != "" {
		return nil, usageErrorf("--target-time and --target-gtid: give at most one recovery target")
	}
	if targetTime != "" {
		at, err := time.Parse(time.RFC3339, targetTime)
		if err != nil {
			return nil, usageErrorf("--target-time %q: want RFC 3339 (e.g. 2026-12-05T10:30:00Z): %w", targetTime, err)
		}
		t.TargetTime = &metav1.Time{Time: at}
	}
	if targetGTID != "" {
		if !gtidPattern.MatchString(targetGTID) {
			return nil, usageErrorf("--target-gtid %q: want one transaction, <server uuid>:<number>", targetGTID)
		}
		t.TargetGTID = targetGTID
	}
	return t, nil
}

func (o *options) restore(ctx context.Context, name, backup string, target *mysqlv1beta1.BootstrapFromBackup, output string) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	b := &mysqlv1beta1.MySQLBackup{}
	if err := o.client.Get(rctx, client.ObjectKey{Namespace: o.namespace, Name: backup}, b); err != nil {
		return apiError("get", "mysqlbackups", o.namespace, backup, err)
	}
	if b.Status.Phase != mysqlv1beta1.BackupPhaseCompleted {
		return withCode(ExitRefused, "MySQLBackup %s is %q, not Completed: only a completed backup restores", backup, b.Status.Phase)
	}
	if name == b.Spec.Cluster {
		return withCode(ExitRefused, "%s is the backup's own cluster: a restore makes a new cluster, name another", name)
	}
	spec := mysqlv1beta1.MySQLClusterSpec{}
	source := &mysqlv1beta1.MySQLCluster{}
	err := o.client.Get(rctx, client.ObjectKey{Namespace: o.namespace, Name: b.Spec.Cluster}, source)
	switch {
	case err == nil:
		spec = *source.Spec.DeepCopy()
		spec.Primary, spec.Paused = "", false
	case apierrors.IsNotFound(err):
		spec.Instances = new(int32(3))
		spec.MySQL.Version = series(b.Status.MySQLVersion)
		fmt.Fprintf(o.io.ErrOut, "Cluster %s is gone: the manifest has the backup's MySQL series and the defaults.\n", b.Spec.Cluster)
	default:
		return apiError("get", "mysqlclusters", o.namespace, b.Spec.Cluster, err)
	}
	target.Name = backup
	spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: target}
	c := &mysqlv1beta1.MySQLCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: mysqlv1beta1.GroupVersion.String(), Kind: "MySQLCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec:       spec,
	}
	raw, err := manifest(c, output)
	if err != nil {
		return fmt.Errorf("while writing the manifest: %w", err)
	}
	_, err = o.io.Out.Write(raw)
	return err
}

// manifest encodes a new object for kubectl apply: without the status (the operator's to
// write) and the empty creation time.
func manifest(obj client.Object, output string) ([]byte, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	prune(m)
	if output == "json" {
		raw, err := json.MarshalIndent(m, "", "  ")
		return append(raw, '\n'), err
	}
	return yaml.Marshal(m)
}

// prune drops the empty objects Go's zero structs leave in m ("tls: {}"), deepest first.
func prune(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			prune(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		}
	}
}

// series is the MySQL series ("9.7") of a version ("9.7.4"); empty for an empty version.
func series(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}
