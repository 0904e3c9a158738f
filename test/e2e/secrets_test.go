package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// secrets are the passwords and keys the run's clusters and stores were given; once every
// test passed, the operator's whole log must hold none of them (requireNoSecretLogged).
var secrets = struct {
	sync.Mutex
	values map[string]string // value -> what it is
}{values: map[string]string{}}

// rememberSecret records a secret value the operator's log must never show.
func rememberSecret(value, what string) {
	if len(value) < 8 {
		return // too short to tell from ordinary words
	}
	secrets.Lock()
	secrets.values[value] = what
	secrets.Unlock()
}

// rememberCredentials records every password of the cluster's credentials Secret.
func rememberCredentials(t *testing.T, ns, cluster string) {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster + "-credentials"}, s))
	for _, key := range resources.CredentialKeys {
		rememberSecret(string(s.Data[key]), ns+"/"+cluster+" "+key)
	}
}

// requireNoSecretLogged scans for every secret the run remembered: the operator's whole
// log, every Event, MySQLCluster and MySQLBackup left in the API server (spec, status,
// annotations), and the command line of every process on the machine (every container of
// the ground's nodes runs here: mysqld, the exporters, the operator, probes under way).
func requireNoSecretLogged(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	log := g.FullOperatorLogs(ctx)
	places := map[string]string{"the operator's log": log}
	objects, err := apiObjects(ctx)
	if err != nil {
		return err
	}
	places["Events, MySQLClusters and MySQLBackups"] = objects
	places["process command lines"] = commandLines()
	secrets.Lock()
	defer secrets.Unlock()
	if len(secrets.values) == 0 {
		return fmt.Errorf("no secret was remembered: the scan would prove nothing")
	}
	var found []string
	for where, text := range places {
		for value, what := range secrets.values {
			if strings.Contains(text, value) {
				found = append(found, what+" in "+where)
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("secrets leaked: %s", strings.Join(found, ", "))
	}
	fmt.Printf("operator log (%d bytes), API objects (%d bytes) and process command lines (%d bytes) scanned for %d secrets: none found\n",
		len(log), len(objects), len(places["process command lines"]), len(secrets.values))
	return requireStructuredLog(log)
}

// apiObjects is every Event, MySQLCluster and MySQLBackup of every namespace, as JSON.
func apiObjects(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, list := range []client.ObjectList{&corev1.EventList{}, &mysqlv1beta1.MySQLClusterList{}, &mysqlv1beta1.MySQLBackupList{}} {
		if err := k8s.List(ctx, list); err != nil {
			return "", fmt.Errorf("while listing %T for the secrets scan: %w", list, err)
		}
		raw, err := json.Marshal(list)
		if err != nil {
			return "", err
		}
		b.Write(raw)
	}
	return b.String(), nil
}

// commandLines is the command line of every process of this machine the scan may read.
func commandLines() string {
	var b strings.Builder
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil {
			b.Write(raw)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// controllerLifecycle matches what controller-runtime logs of a controller starting and
// stopping, outside any reconcile.
var controllerLifecycle = regexp.MustCompile(`^(Starting|Stopping|Shutdown|All workers finished|Wait completed)`)

// requireStructuredLog checks the operator's log is what a production log pipeline reads:
// every line one JSON object with a level, a time and a message, and every line a
// MySQLCluster reconcile wrote naming the controller, the object and the reconcile ID.
func requireStructuredLog(log string) error {
	var reconcileLines int
	for line := range strings.Lines(log) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--- operator pod ") {
			continue // the ground's header of each pod's log
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			return fmt.Errorf("the operator's log has a line that is not JSON: %q", line)
		}
		for _, k := range []string{"level", "ts", "msg"} {
			if _, ok := entry[k]; !ok {
				return fmt.Errorf("the operator's log line %q has no %q", line, k)
			}
		}
		msg, _ := entry["msg"].(string)
		if entry["controller"] != "mysqlcluster" || controllerLifecycle.MatchString(msg) {
			continue // the controller's start and stop lines belong to no reconcile
		}
		reconcileLines++
		if _, ok := entry["reconcileID"]; !ok || entry["MySQLCluster"] == nil {
			return fmt.Errorf("a reconcile's log line lacks its object or reconcile ID: %q", line)
		}
	}
	if reconcileLines == 0 {
		return fmt.Errorf("no line of the mysqlcluster controller in the operator's log: the check would prove nothing")
	}
	fmt.Printf("operator log: every line JSON, %d reconcile lines with their object and reconcile ID\n", reconcileLines)
	return nil
}
