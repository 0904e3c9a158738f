package metrics

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func instance(name string) prometheus.Labels {
	return prometheus.Labels{LabelNamespace: "ns", LabelCluster: "db", LabelInstance: name}
}

func TestTopologySeriesFollowTheInstancesAndGoWithTheCluster(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	SetTopology(c, []Instance{
		{Name: "db-0", Up: true, Primary: true, SemiSync: true},
		{Name: "db-1", Up: true, Replica: true, IORunning: true, SQLRunning: true, Lag: 3, SemiSync: true},
		{Name: "db-2", Up: true, Replica: true, IORunning: false, SQLRunning: true, Errant: 2},
	}, false)
	require.Equal(t, 1.0, testutil.ToFloat64(InstancePrimary.With(instance("db-0"))))
	require.Equal(t, 0.0, testutil.ToFloat64(InstancePrimary.With(instance("db-1"))))
	require.Equal(t, 3.0, testutil.ToFloat64(ReplicationLag.With(instance("db-1"))))
	require.Equal(t, 0.0, testutil.ToFloat64(ReplicationIORunning.With(instance("db-2"))))
	require.Equal(t, 2.0, testutil.ToFloat64(ErrantTransactions.With(instance("db-2"))))
	require.Equal(t, 2, testutil.CollectAndCount(ReplicationSQLRunning), "replicas only")

	// The same pass again, then one that changes a replica's lag alone.
	same := []Instance{
		{Name: "db-0", Up: true, Primary: true, SemiSync: true},
		{Name: "db-1", Up: true, Replica: true, IORunning: true, SQLRunning: true, Lag: 3, SemiSync: true},
		{Name: "db-2", Up: true, Replica: true, IORunning: false, SQLRunning: true, Errant: 2},
	}
	SetTopology(c, same, false)
	require.Equal(t, 3.0, testutil.ToFloat64(ReplicationLag.With(instance("db-1"))))
	require.Equal(t, 3, testutil.CollectAndCount(InstanceUp))
	same[1].Lag = 7
	SetTopology(c, same, false)
	require.Equal(t, 7.0, testutil.ToFloat64(ReplicationLag.With(instance("db-1"))), "a change of one value is set")
	same[1].Lag = 3
	SetTopology(c, same, false)
	require.Equal(t, 3.0, testutil.ToFloat64(ReplicationLag.With(instance("db-1"))), "the caller's slice is copied, not kept")

	// db-2 unreachable, db-1 gone (scaled down), the failover blocked.
	SetTopology(c, []Instance{{Name: "db-0", Up: true, Primary: true}, {Name: "db-2", Replica: true}}, true)
	require.Equal(t, 0.0, testutil.ToFloat64(InstanceUp.With(instance("db-2"))))
	require.Equal(t, 2, testutil.CollectAndCount(InstanceUp))
	require.Zero(t, testutil.CollectAndCount(ReplicationLag), "no replica was read")
	require.Equal(t, 1.0, testutil.ToFloat64(FailoverBlocked.With(Cluster(c))))

	CountPrimaryChange(c, KindFailover)
	SetClusterStatus(c, &mysqlv1beta1.MySQLClusterStatus{Phase: mysqlv1beta1.PhaseDegraded, Instances: 3, ReadyInstances: 2})
	require.Equal(t, len(mysqlv1beta1.ClusterPhases), testutil.CollectAndCount(ClusterPhase))
	require.Equal(t, 1.0, testutil.ToFloat64(ClusterPhase.With(prometheus.Labels{LabelNamespace: "ns", LabelCluster: "db",
		LabelPhase: string(mysqlv1beta1.PhaseDegraded)})))
	require.Equal(t, 2.0, testutil.ToFloat64(ClusterReadyInstances.With(Cluster(c))))

	ForgetCluster(c)
	for _, v := range Collectors {
		if v != TopologyPassDuration {
			require.Zero(t, testutil.CollectAndCount(v), "a deleted cluster leaves no series")
		}
	}
}

// docs/metrics.md lists every metric of this package, and nothing else under dolphin_.
func TestDocsListEveryMetric(t *testing.T) {
	raw, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(dolphin_[a-z_]+)`").FindAllStringSubmatch(string(raw), -1) {
		documented = append(documented, m[1])
	}
	var defined []string
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range Collectors {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			defined = append(defined, name.FindStringSubmatch(d.String())[1])
		}
	}
	slices.Sort(documented)
	slices.Sort(defined)
	require.Equal(t, defined, documented)
}
