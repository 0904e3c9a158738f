package localcluster

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// dolphinArgs adds to dolphinMySQLArgs what the pod's TLS volume gives the real mysqld: the
// Secret's ca.crt, tls.crt and tls.key, written to a folder of the pod's, become --ssl-*.
// A pod whose Secret cannot be read starts without them (and the operator, which then
// cannot verify it, says so).
func dolphinArgs(cs kubernetes.Interface, dir string, log io.Writer) func(*corev1.Pod) []string {
	return func(pod *corev1.Pod) []string {
		args := append([]string(nil), dolphinMySQLArgs...)
		for _, v := range pod.Spec.Volumes {
			if v.Name != "tls" || v.Secret == nil {
				continue
			}
			tlsDir := filepath.Join(dir, "pod-tls", pod.Namespace+"_"+pod.Name)
			if err := fillVolume(context.Background(), cs, pod, v.Name, tlsDir); err != nil {
				fmt.Fprintf(log, "podrunner: %s/%s: %v\n", pod.Namespace, pod.Name, err)
				continue
			}
			for flag, key := range map[string]string{"--ssl-ca": "ca.crt", "--ssl-cert": "tls.crt", "--ssl-key": "tls.key"} {
				args = append(args, flag+"="+filepath.Join(tlsDir, key))
			}
		}
		return args
	}
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

// initEnv resolves the environment of the pod's "init" container.
func initEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (map[string]string, error) {
	for k := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[k]; c.Name == "init" {
			vars, err := podEnv(ctx, cs, pod, c, strings.NewReplacer())
			if err != nil {
				return nil, err
			}
			env := map[string]string{}
			for _, kv := range vars {
				name, value, _ := strings.Cut(kv, "=")
				env[name] = value
			}
			return env, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s has no init container", pod.Namespace, pod.Name)
}
