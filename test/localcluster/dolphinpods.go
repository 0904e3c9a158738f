package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// dolphinMySQLArgs are the settings of Dolphin's my.cnf that decide how an instance behaves
// in a topology; the pod runner's mysqld gets them too. Every instance starts fenced
// (super_read_only), so a restarted primary never takes writes before the operator says so.
var dolphinMySQLArgs = []string{
	"--read-only=ON",
	"--super-read-only=ON",
	"--plugin-load-add=semisync_source.so;semisync_replica.so;mysql_clone.so",
	"--rpl-semi-sync-source-wait-point=AFTER_SYNC",
}

// dolphinInit plays the init container of a Dolphin pod on a new data folder: it creates the
// operator's accounts (resources.AccountsSQL) with the passwords of the cluster's Secret, out
// of the binary log as the real init container's --initialize does.
func dolphinInit(cs kubernetes.Interface) func(context.Context, *corev1.Pod, *mysqld.Instance) error {
	return func(ctx context.Context, pod *corev1.Pod, inst *mysqld.Instance) error {
		env, err := initEnv(ctx, cs, pod)
		if err != nil {
			return err
		}
		db, err := inst.DB()
		if err != nil {
			return err
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("while connecting to %s: %w", inst.Addr(), err)
		}
		defer conn.Close()
		var host string
		if err := conn.QueryRowContext(ctx, "SELECT @@hostname").Scan(&host); err != nil || host != pod.Name {
			return fmt.Errorf("%s answers as %q, not as pod %s (%w)", inst.Addr(), host, pod.Name, err)
		}
		// The real init container runs before my.cnf's super_read_only applies; here the
		// server already runs fenced, so the fence is lifted for these statements only.
		stmts := append([]string{"SET SESSION sql_log_bin = 0", "SET GLOBAL super_read_only = OFF"},
			resources.AccountStatements(func(k string) string { return env[k] })...)
		stmts = append(stmts, "SET GLOBAL super_read_only = ON")
		for _, s := range stmts {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("while creating accounts on %s: %w", inst.Addr(), err)
			}
		}
		return nil
	}
}

// initEnv resolves the environment of the pod's "init" container (values and Secret keys).
func initEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (map[string]string, error) {
	env := map[string]string{}
	for _, c := range pod.Spec.InitContainers {
		if c.Name != "init" {
			continue
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("while reading Secret %s for %s: %w", ref.Name, e.Name, err)
				}
				env[e.Name] = string(s.Data[ref.Key])
			}
		}
		return env, nil
	}
	return nil, fmt.Errorf("pod %s/%s has no init container", pod.Namespace, pod.Name)
}
