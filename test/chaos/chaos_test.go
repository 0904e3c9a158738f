package chaos_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/workload"
)

// run is what a round works with.
type run struct {
	t         *testing.T
	ns        string
	name      string
	names     []string
	bystander string
	pokes     int
	scaled    scaling // the bystander's last scaling (poke)
}

// TestChaos runs every round of the run's levels once (the Core rounds alone under
// DOLPHIN_TEST_LEVEL=core), in an order drawn from the seed it prints (DOLPHIN_CHAOS_SEED
// replays one), and prints one summary line. DOLPHIN_CHAOS_ROUNDS=<text>
// runs only the rounds whose name contains text (to replay one, or to see a broken rule fail).
func TestChaos(t *testing.T) {
	ground.Level(t, ground.Core)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DOLPHIN_CHAOS_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "DOLPHIN_CHAOS_SEED")
	}
	r := &run{t: t, ns: namespace(t), name: "chaos", names: []string{"chaos-0", "chaos-1", "chaos-2"}, bystander: "bystander"}
	require.NoError(t, k8s.Create(ctx, newCluster(r.ns, r.name, 3)))
	require.NoError(t, k8s.Create(ctx, newCluster(r.ns, r.bystander, 1)))
	for _, n := range []string{r.name, r.bystander} {
		took, _, err := ready(ctx, r.ns, n, 4*time.Minute)
		require.NoError(t, err, "%s Ready", n)
		t.Logf("%s Ready after %s", n, took.Round(time.Second))
	}

	w, err := workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, r.ns, r.name, ground.ServiceHost(r.ns, r.name+"-primary"))
	})
	require.NoError(t, err)
	dbs := map[string]*sql.DB{}
	for _, n := range r.names {
		d, err := g.DB(ctx, r.ns, r.name, n)
		require.NoError(t, err)
		d.SetConnMaxLifetime(time.Second)
		defer d.Close()
		dbs[n] = d
	}
	s := workload.StartSampler(dbs)
	require.NoError(t, ground.Poll(ctx, time.Minute, func() error {
		if len(w.Acks()) == 0 {
			return errors.New("no write acknowledged yet")
		}
		return nil
	}), "the writer commits before the first round")

	rounds := slices.DeleteFunc(r.rounds(), func(rd round) bool { return !ground.Runs(rd.level) })
	if only := os.Getenv("DOLPHIN_CHAOS_ROUNDS"); only != "" {
		rounds = slices.DeleteFunc(rounds, func(rd round) bool { return !strings.Contains(rd.name, only) })
		require.NotEmpty(t, rounds, "DOLPHIN_CHAOS_ROUNDS=%q names no round", only)
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	rng.Shuffle(len(rounds), func(i, j int) { rounds[i], rounds[j] = rounds[j], rounds[i] })
	t.Logf("chaos seed=%d order=%v", seed, names(rounds))
	var maxRecovery time.Duration
	lost := 0
	for k, rd := range rounds {
		start := time.Now()
		pokesBefore := r.pokes
		ended, err := rd.fault(ctx)
		require.NoError(t, err, "round %s: the fault", rd.name)
		took, c, err := r.settled(ctx, w, ended)
		if err != nil {
			// Unsettled, the writes may still be checked: a lost write says more than
			// a cluster that did not recover.
			if p, perr := r.primary(ctx); perr == nil {
				missing, merr := r.lostWrites(ctx, p, w.Acks())
				t.Logf("round %s: unsettled; on primary %s, acknowledged writes missing: %d (%v)", rd.name, p, len(missing), merr)
				require.Empty(t, missing, "round %s: acknowledged writes missing from the primary", rd.name)
			}
		}
		require.NoError(t, err, "round %s: the cluster is Ready within %s of the fault's end", rd.name, recoveryBound)
		recovery := time.Since(ended)
		maxRecovery = max(maxRecovery, recovery)
		missing, err := r.lostWrites(ctx, c.Status.CurrentPrimary, w.Acks())
		require.NoError(t, err, "round %s: reading the acknowledged writes", rd.name)
		lost += len(missing)
		t.Logf("round %d %s: %s in all, Ready %s after the fault ended (%s waiting), primary %s, %d acknowledged, lost %v",
			k+1, rd.name, time.Since(start).Round(100*time.Millisecond), recovery.Round(100*time.Millisecond),
			took.Round(100*time.Millisecond), c.Status.CurrentPrimary, len(w.Acks()), missing)
		require.Empty(t, missing, "round %s: acknowledged writes missing from the primary", rd.name)
		require.Greater(t, r.pokes, pokesBefore, "round %s: the bystander was reconciled during the round", rd.name)
		scaled, err := r.bystanderScaled(ctx)
		require.NoError(t, err, "round %s", rd.name)
		t.Logf("round %d: the bystander scaled to %d instances, Ready %s after it was asked", k+1, r.scaled.to,
			scaled.Round(100*time.Millisecond))
	}
	_, c, err := r.settled(ctx, w, time.Now())
	require.NoError(t, err, "the cluster is settled at the end")
	acks := w.Stop()
	sr := s.Stop()
	missing, err := r.lostWrites(ctx, c.Status.CurrentPrimary, acks)
	require.NoError(t, err)
	lost += len(missing)
	t.Logf("%d samples; %d whose first pass alone saw two writable (reads straddling a role change, not counted)",
		sr.Samples, sr.OneReadTwoWritable)
	fmt.Printf("chaos rounds=%d faults=%d lost_writes=%d two_writable_samples=%d max_recovery_s=%.1f seed=%d\n",
		len(rounds), len(rounds), lost, sr.TwoWritable, maxRecovery.Seconds(), seed)
	require.Zero(t, lost, "acknowledged writes lost")
	require.Zero(t, sr.TwoWritable, "samples with two writable instances (first: %s)", sr.FirstOffence)
	require.Positive(t, sr.Samples)
	require.NotEmpty(t, acks)

	// No finalizer stuck: the cluster goes when deleted.
	require.NoError(t, k8s.Delete(ctx, c))
	require.NoError(t, ground.Poll(ctx, 2*time.Minute, func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &mysqlv1beta1.MySQLCluster{})
		if err == nil {
			return fmt.Errorf("%s still exists", c.Name)
		}
		return client.IgnoreNotFound(err)
	}), "the cluster's deletion completes")
}

func names(rs []round) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

// lostWrites reads the acknowledged ids back from the primary (at its pod's IP; retried
// for a bounded time, as a connection may be cut right after a round).
func (r *run) lostWrites(ctx context.Context, primary string, acks []workload.Ack) ([]int, error) {
	var missing []int
	err := ground.Poll(ctx, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d, err := podDB(cctx, r.ns, r.name, primary)
		if err != nil {
			return err
		}
		defer d.Close()
		missing, err = workload.Lost(cctx, d, acks)
		return err
	})
	return missing, err
}

// poke scales the bystander between one and two instances and waits for its status to
// be at the new generation: the operator reconciles other clusters while this one is in
// trouble. The scaling itself (a new instance cloned, or one removed) is awaited at the
// round's end (bystanderScaled).
func (r *run) poke(ctx context.Context) error {
	c := &mysqlv1beta1.MySQLCluster{}
	key := client.ObjectKey{Namespace: r.ns, Name: r.bystander}
	// Read and written again on a conflict (the operator writes the status), while the
	// API server restarts, or while no operator answers the webhooks: after an API server
	// outage longer than its lease the operator exits (leader election lost) and the
	// kubelet's restart back-off grows with every exit of the run.
	if err := ground.Poll(ctx, recoveryBound, func() error {
		if err := k8s.Get(ctx, key, c); err != nil {
			return err
		}
		c.Spec.Instances = new(3 - *c.Spec.Instances) // 1 -> 2 -> 1 ...
		return k8s.Update(ctx, c)
	}); err != nil {
		return err
	}
	want := c.Generation
	r.scaled = scaling{to: *c.Spec.Instances, at: time.Now()}
	// Long enough for an operator that was just killed: its successor waits out its
	// container's restart back-off and the leader-election lease first.
	if err := ground.Poll(ctx, recoveryBound, func() error {
		if err := k8s.Get(ctx, key, c); err != nil {
			return err
		}
		if c.Status.ObservedGeneration < want {
			return fmt.Errorf("bystander status at generation %d of %d", c.Status.ObservedGeneration, want)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("the bystander was not reconciled: %w", err)
	}
	r.pokes++
	return nil
}

// scaling is the bystander's last scaling: to how many instances, and when asked.
type scaling struct {
	to int32
	at time.Time
}

// bystanderScaled waits until the bystander is Ready with the instances the last poke
// asked for, every one replicating, and says how long after the poke that was.
func (r *run) bystanderScaled(ctx context.Context) (time.Duration, error) {
	_, c, err := ready(ctx, r.ns, r.bystander, recoveryBound)
	if err != nil {
		return 0, fmt.Errorf("the bystander did not scale to %d: %w", r.scaled.to, err)
	}
	if got := c.Status.ReadyInstances; got != r.scaled.to {
		return 0, fmt.Errorf("the bystander has %d ready instances, not the %d asked for", got, r.scaled.to)
	}
	return time.Since(r.scaled.at), nil
}

// settled waits, until recoveryBound after the fault ended, until a write was acknowledged
// after it ended, the status says Ready, and every instance is what that status says over
// SQL (the primary writable, each other fenced and replicating from it, both threads on).
func (r *run) settled(ctx context.Context, w *workload.Writer, ended time.Time) (time.Duration, *mysqlv1beta1.MySQLCluster, error) {
	start := time.Now()
	// The bound counts from the fault's end: a fault that waits after it (for the
	// operator's new process) spends the same bound.
	actx, cancel := context.WithDeadline(ctx, ended.Add(recoveryBound))
	defer cancel()
	if _, err := w.AckedAfter(actx, ended); err != nil {
		return time.Since(start), nil, err
	}
	var c *mysqlv1beta1.MySQLCluster
	err := ground.Poll(ctx, time.Until(ended.Add(recoveryBound)), func() error {
		var err error
		if _, c, err = ready(ctx, r.ns, r.name, 0); err != nil {
			return err
		}
		return r.replicating(ctx, c.Status.CurrentPrimary)
	})
	return time.Since(start), c, err
}

// replicating checks every instance over SQL against primary.
func (r *run) replicating(ctx context.Context, primary string) error {
	for _, n := range r.names {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := func() error {
			d, err := podDB(cctx, r.ns, r.name, n)
			if err != nil {
				return err
			}
			defer d.Close()
			var sro bool
			if err := d.QueryRowContext(cctx, "SELECT @@super_read_only").Scan(&sro); err != nil {
				return err
			}
			if n == primary {
				if sro {
					return fmt.Errorf("primary %s is read-only", n)
				}
				return nil
			}
			var host, io, sqlState string
			err = d.QueryRowContext(cctx, `SELECT c.HOST, s.SERVICE_STATE, a.SERVICE_STATE
FROM performance_schema.replication_connection_configuration c
JOIN performance_schema.replication_connection_status s USING (CHANNEL_NAME)
JOIN performance_schema.replication_applier_status a USING (CHANNEL_NAME)`).Scan(&host, &io, &sqlState)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			if !sro || host != ground.InstanceHost(r.ns, r.name, primary) || io != "ON" || sqlState != "ON" {
				return fmt.Errorf("%s: super_read_only %v, source %s, receiver %s, applier %s", n, sro, host, io, sqlState)
			}
			return nil
		}()
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
