package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseOptionsReadsTheEnvironmentOLMSets(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", " team-a, team-b ,,")
	t.Setenv("ENABLE_WEBHOOKS", "false")
	t.Setenv("DOLPHIN_MYSQL_ADDRESSES", "pod-ip")
	o, _, err := parseOptions([]string{"--leader-elect", "--webhook-port=9999"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.watchNamespaces, []string{"team-a", "team-b"}) {
		t.Errorf("watch namespaces: %q", o.watchNamespaces)
	}
	if o.enableWebhooks || !o.leaderElect || o.webhookPort != 9999 || o.mysqlAddresses != "pod-ip" {
		t.Errorf("unexpected options: %+v", o)
	}
}

func TestParseOptionsDefaults(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", "")
	t.Setenv("ENABLE_WEBHOOKS", "")
	t.Setenv("DOLPHIN_MYSQL_ADDRESSES", "")
	o, _, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.enableWebhooks || len(o.watchNamespaces) != 0 || !o.secureMetrics || o.enableHTTP2 || o.mysqlAddresses != "dns" ||
		o.maxConcurrent != 16 || o.apiQPS != 200 || o.apiBurst != 400 || o.cloneTimeout != 2*time.Hour || o.pprofAddr != "" {
		t.Errorf("unexpected defaults: %+v", o)
	}
}

func TestParseOptionsRejectsAnUnknownFlag(t *testing.T) {
	if _, _, err := parseOptions([]string{"--no-such-flag"}); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
}

func TestParseOptionsRejectsAnUnknownAddressModeFromTheEnvironment(t *testing.T) {
	t.Setenv("DOLPHIN_MYSQL_ADDRESSES", "hostname")
	_, _, err := parseOptions(nil)
	if err == nil || !strings.Contains(err.Error(), "--mysql-addresses") {
		t.Fatalf("want an error naming --mysql-addresses, got %v", err)
	}
}

func TestParseOptionsRejectsBadWorkerCloneAndWatchSettings(t *testing.T) {
	for _, args := range [][]string{{"--max-concurrent-reconciles=0"}, {"--clone-timeout=-1s"}, {"--primary-watch-interval=-1s"},
		{"--kube-api-burst=0"}, {"--inject-webhook-ca", "--self-issue-webhook-cert"}, {"--inject-webhook-ca"}} {
		_, _, err := parseOptions(args)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(args[0], "=", 2)[0]) {
			t.Errorf("%v: want an error naming the flag, got %v", args, err)
		}
	}
}

func TestTheClientLimitIsTheFlagsOrNone(t *testing.T) {
	t.Setenv("KUBECONFIG", writeKubeconfig(t))
	o, _, err := parseOptions([]string{"--kube-api-qps=50", "--kube-api-burst=70"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := restConfig(o); cfg.QPS != 50 || cfg.Burst != 70 {
		t.Errorf("QPS %v burst %d, want 50 and 70", cfg.QPS, cfg.Burst)
	}
	o.apiQPS = 0
	if cfg := restConfig(o); cfg.QPS >= 0 {
		t.Errorf("--kube-api-qps=0 left a client-side limit of %v QPS", cfg.QPS)
	}
}

// writeKubeconfig writes a kubeconfig of a server that is never called.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRestoreFlags(t *testing.T) {
	good := []string{"--key=k", "--method=Physical", "--sha256=feed", "--gtid-set=u:1", "--data=/var/lib/mysql", "--s3-bucket=b"}
	f, err := parseRestoreFlags(good)
	if err != nil || f.method != "Physical" || f.s3Bucket != "b" || f.timeout.String() != "2h0m0s" {
		t.Fatalf("%+v %v", f, err)
	}
	for name, tc := range map[string]struct {
		drop, add, want string
	}{
		"no key":         {drop: "--key=k", want: "--key is required"},
		"no checksum":    {drop: "--sha256=feed", want: "--sha256 is required"},
		"no GTID set":    {drop: "--gtid-set=u:1", want: "--gtid-set is required"},
		"no store":       {drop: "--s3-bucket=b", want: "exactly one of --s3-bucket and --dir"},
		"two stores":     {add: "--dir=/backup", want: "exactly one of --s3-bucket and --dir"},
		"another method": {drop: "--method=Physical", add: "--method=Snapshot", want: `--method "Snapshot"`},
	} {
		t.Run(name, func(t *testing.T) {
			var args []string
			for _, a := range good {
				if a != tc.drop {
					args = append(args, a)
				}
			}
			if tc.add != "" {
				args = append(args, tc.add)
			}
			if _, err := parseRestoreFlags(args); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// syncingCache is a cache whose informers sync when synced is closed.
type syncingCache struct{ synced chan struct{} }

func (c syncingCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

func TestTheOperatorIsReadyOnceItsCachesSynced(t *testing.T) {
	c := syncingCache{synced: make(chan struct{})}
	check := cachesSynced(c)
	r := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	start := time.Now()
	if err := check(r); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("ready before the caches synced: %v", err)
	}
	if waited := time.Since(start); waited > 2*cacheSyncWait {
		t.Errorf("the probe waited %s", waited)
	}
	close(c.synced)
	if err := check(r); err != nil {
		t.Fatalf("not ready once synced: %v", err)
	}
}
