package topology

import (
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// TestFailoverQuorum walks every reachability pattern of 3- and 5-instance clusters, for
// every semi-sync wait count W, against every placement of the newest acknowledged write
// on exactly W replicas (all an adversary can choose). The primary is lost. Decide must
// either refuse (FailoverBlocked, freezing nothing) or promote a replica holding that write;
// and it must refuse exactly when fewer than N-W replicas are reachable.
func TestFailoverQuorum(t *testing.T) {
	const acked = u1 + ":11"
	cases := 0
	for _, n := range []int{3, 5} {
		replicas := n - 1
		for w := 1; w <= replicas; w++ {
			for reach := range 1 << replicas {
				for placed := range 1 << replicas {
					if bits.OnesCount(uint(placed)) != w {
						continue
					}
					for _, frozenAlready := range []bool{false, true} {
						cases++
						in := quorumInput(n, w, reach, placed, frozenAlready)
						d := Decide(in)
						name := fmt.Sprintf("n=%d w=%d reachable=%0*b acked-on=%0*b frozen=%v", n, w, replicas, reach, replicas, placed, frozenAlready)
						blocked := bits.OnesCount(uint(reach)) < n-w
						if blocked {
							require.Equal(t, StateFailoverBlocked, d.State, "%s: %s", name, d.Message)
							require.Equal(t, mysqlv1beta1.ReasonFailoverBlocked, d.Reason, name)
							require.Empty(t, d.Actions, "%s: a blocked failover changes nothing", name)
							continue
						}
						require.Equal(t, StateFailover, d.State, "%s: %s", name, d.Message)
						if !frozenAlready {
							require.Len(t, d.Actions, bits.OnesCount(uint(reach)), name)
							for _, a := range d.Actions {
								require.Equal(t, ActFreeze, a.Kind, name)
							}
							continue
						}
						require.Len(t, d.Actions, 1, name)
						a := d.Actions[0]
						require.Equal(t, ActPromote, a.Kind, name)
						require.True(t, a.WaitFor.Contains(set(acked)), "%s: promoted %s without the acknowledged write", name, a.Target)
					}
				}
			}
		}
	}
	// 3 instances: W 1..2 × 4 patterns × C(2,W) placements; 5: W 1..4 × 16 × C(4,W); × 2.
	require.Equal(t, 2*(4*(2+1)+16*(4+6+4+1)), cases)
}

// quorumInput: db-0, the primary, lost past the detection delay; replica k (db-k) is
// reachable when bit k-1 of reach is set, and has received the acknowledged write u1:11
// when bit k-1 of placed is.
func quorumInput(n, w, reach, placed int, frozenAlready bool) Input {
	instances := []Instance{with(hung("db-0", 0, time.Minute), func(i *Instance) { i.Stopped = true })}
	for k := 1; k < n; k++ {
		name := fmt.Sprintf("db-%d", k)
		if reach&(1<<(k-1)) == 0 {
			instances = append(instances, with(down(name, k, time.Minute), func(i *Instance) { i.Fault = "NoAnswer" }))
			continue
		}
		received := u1 + ":1-10"
		if placed&(1<<(k-1)) != 0 {
			received = u1 + ":1-11"
		}
		r := replica(name, k, "db-0", u1+":1-10")
		r.Received = set(received)
		if frozenAlready {
			r.IORunning = false
		}
		instances = append(instances, r)
	}
	return withAcks(input("db-0", instances...), w)
}
