package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// requireNoSecretLogged scans the whole log of the operator for every secret the run
// remembered.
func requireNoSecretLogged(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	log := g.FullOperatorLogs(ctx)
	secrets.Lock()
	defer secrets.Unlock()
	if len(secrets.values) == 0 {
		return fmt.Errorf("no secret was remembered: the scan would prove nothing")
	}
	var found []string
	for value, what := range secrets.values {
		if strings.Contains(log, value) {
			found = append(found, what)
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("the operator's log shows %s", strings.Join(found, ", "))
	}
	fmt.Printf("operator log (%d bytes) scanned for %d secrets: none found\n", len(log), len(secrets.values))
	return requireStructuredLog(log)
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
