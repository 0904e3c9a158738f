package cli

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/dolphin-operator/dolphin/internal/resources"
)

// sqlTimeout bounds reading one instance (the exec's round trip and the client's work).
const sqlTimeout = 10 * time.Second

// sqlRunner runs statements in an instance's mysqld container with the local client and
// returns its batch output (tab-separated rows).
type sqlRunner interface {
	Query(ctx context.Context, pod *corev1.Pod, statements string) (string, error)
}

// podExec runs the mysql client in the mysqld container through the API server's
// pods/exec, as root over the local socket: the same way the container's own probes
// reach mysqld. It needs the "create" verb on "pods/exec".
type podExec struct {
	config *rest.Config
	pods   rest.Interface
}

// clientScript runs the statements given as its first argument; the password stays in the
// container's environment, out of the command line.
var clientScript = `MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql --no-defaults --protocol=socket --socket=` +
	resources.SocketPath + ` -uroot --connect-timeout=5 -N -B -e "$1"`

func (p *podExec) Query(ctx context.Context, pod *corev1.Pod, statements string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sqlTimeout)
	defer cancel()
	exec, err := p.executor(pod, &corev1.PodExecOptions{Container: resources.ContainerMySQL,
		Command: []string{"sh", "-c", clientScript, "sh", statements}, Stdout: true, Stderr: true})
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("exec in %s: %w: %s", pod.Name, err, msg)
		}
		return "", fmt.Errorf("exec in %s: %w", pod.Name, err)
	}
	return stdout.String(), nil
}

// executor is an exec into pod with opts: WebSockets first, SPDY for an API server that
// does not upgrade them (as kubectl does).
func (p *podExec) executor(pod *corev1.Pod, opts *corev1.PodExecOptions) (remotecommand.Executor, error) {
	req := p.pods.Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(opts, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.config, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod.Name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.config, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod.Name, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod.Name, err)
	}
	return exec, nil
}

// instanceQuery reads what status shows of an instance: one row per fact, its name first.
// Batch mode escapes tabs and newlines inside values, so a row splits on tabs.
const instanceQuery = `SELECT 'gtid_executed', REPLACE(@@GLOBAL.gtid_executed, '\n', '');
SELECT 'read_only', @@GLOBAL.read_only, @@GLOBAL.super_read_only;
SELECT 'io', SERVICE_STATE, LAST_ERROR_MESSAGE FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '';
SELECT 'source', HOST FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = '';
SELECT 'sql', SERVICE_STATE FROM performance_schema.replication_applier_status WHERE CHANNEL_NAME = '';
SELECT 'sql_error', LAST_ERROR_MESSAGE FROM performance_schema.replication_applier_status_by_worker
  WHERE CHANNEL_NAME = '' AND LAST_ERROR_NUMBER <> 0 LIMIT 1;
SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_status
  WHERE VARIABLE_NAME IN ('Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_clients', 'Rpl_semi_sync_replica_status')`

// InstanceSQL is what an instance said over SQL.
type InstanceSQL struct {
	GTIDExecuted  string `json:"gtidExecuted"`
	ReadOnly      bool   `json:"readOnly"`
	SuperReadOnly bool   `json:"superReadOnly"`
	// Source is the host it replicates from (empty: none configured).
	Source string `json:"source,omitempty"`
	// IOThread and SQLThread are the receiver's and applier's states (ON, OFF,
	// CONNECTING); empty without replication configured.
	IOThread  string `json:"ioThread,omitempty"`
	SQLThread string `json:"sqlThread,omitempty"`
	// LastError is the receiver's or the applier's last error.
	LastError string `json:"lastError,omitempty"`
	// SemiSyncSource and SemiSyncReplica: the source and replica sides of semi-sync are on.
	SemiSyncSource  bool `json:"semiSyncSource"`
	SemiSyncReplica bool `json:"semiSyncReplica"`
	// SemiSyncClients is how many semi-sync replicas are connected (a source's count).
	SemiSyncClients int `json:"semiSyncClients"`
}

// parseInstance reads instanceQuery's output.
func parseInstance(out string) (*InstanceSQL, error) {
	s := &InstanceSQL{}
	seen := false
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "gtid_executed":
			s.GTIDExecuted, seen = unescape(f[1]), true
		case "read_only":
			s.ReadOnly = f[1] == "1"
			s.SuperReadOnly = len(f) > 2 && f[2] == "1"
		case "io":
			s.IOThread = f[1]
			if len(f) > 2 && f[2] != "" && f[2] != "NULL" {
				s.LastError = unescape(f[2])
			}
		case "source":
			s.Source = f[1]
		case "sql":
			s.SQLThread = f[1]
		case "sql_error":
			if s.LastError == "" {
				s.LastError = unescape(f[1])
			}
		case "Rpl_semi_sync_source_status":
			s.SemiSyncSource = f[1] == "ON"
		case "Rpl_semi_sync_replica_status":
			s.SemiSyncReplica = f[1] == "ON"
		case "Rpl_semi_sync_source_clients":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("the semi-sync client count (Rpl_semi_sync_source_clients) %q: %w", f[1], err)
			}
			s.SemiSyncClients = n
		}
	}
	if !seen {
		return nil, fmt.Errorf("the client printed no gtid_executed: %q", out)
	}
	return s, nil
}

// unescape undoes the client's batch-mode escapes (\n, \t, \\).
func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\0`, "\x00").Replace(v)
}
