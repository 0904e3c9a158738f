package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// How long a test's leftovers may take to go before the check calls them left behind: a
// namespace goes once its MySQL pods have stopped and its clusters' finalizers are done.
const (
	namespacesGone = 4 * time.Minute
	nodesBack      = 2 * time.Minute
	operatorBack   = 3 * time.Minute
)

// brokenFile, in the ground's cluster folder, names the test that left the ground broken
// (a node down, the operator changed): every later test, of this package or another on the
// same ground, fails at once naming it.
const brokenFile = "left-changed-by"

// scene is what a test found on the ground: what it must leave as it was.
type scene struct {
	namespaces []string
	operator   string // the operator Deployment's pod template, as JSON
}

// checker checks that each test leaves the shared ground as it found it.
type checker struct {
	g   *ground.Ground
	k8s client.Client
}

// before runs at a test's start (ground.Level): it fails the test if an earlier one left
// the ground changed, and otherwise records the scene and checks it again at the end.
func (c *checker) before(t ground.LevelT) {
	t.Helper()
	if by, err := os.ReadFile(filepath.Join(c.g.Dir(), brokenFile)); err == nil {
		t.Fatalf("the shared ground was left changed by an earlier test: %s", strings.TrimSpace(string(by)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.look(ctx)
	if err != nil {
		t.Fatalf("reading the shared ground before the test: %v", err)
	}
	// Registered first, so it runs after every cleanup the test registers.
	t.Cleanup(func() {
		left, broken := c.after(s)
		if left != nil {
			t.Errorf("the test left the shared ground changed: %v", left)
		}
		if broken != nil {
			_ = os.WriteFile(filepath.Join(c.g.Dir(), brokenFile), fmt.Appendf(nil, "%s: %v\n", t.Name(), broken), 0o644)
		}
	})
}

// look records the namespaces and the operator's pod template.
func (c *checker) look(ctx context.Context) (scene, error) {
	var s scene
	list := &corev1.NamespaceList{}
	if err := c.k8s.List(ctx, list); err != nil {
		return s, fmt.Errorf("while listing namespaces: %w", err)
	}
	for _, ns := range list.Items {
		s.namespaces = append(s.namespaces, ns.Name)
	}
	d, err := c.operator(ctx)
	if err != nil {
		return s, err
	}
	s.operator, err = template(d)
	return s, err
}

// operator reads the operator's Deployment.
func (c *checker) operator(ctx context.Context) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: ground.OperatorNamespace, Name: ground.OperatorDeployment}, d); err != nil {
		return nil, fmt.Errorf("while reading the operator's Deployment: %w", err)
	}
	return d, nil
}

// template is a Deployment's pod template as JSON, to compare.
func template(d *appsv1.Deployment) (string, error) {
	raw, err := json.Marshal(d.Spec.Template)
	return string(raw), err
}

// after waits, each within its bound, until the test's namespaces are gone, every node
// runs and is Ready, and the operator runs with the pod template it had, answering its
// webhooks; it returns what still differs, and of that what leaves the ground broken for
// the tests after it (a node down, the operator changed). A namespace left behind is the
// test's own failure: the next tests make namespaces of their own.
func (c *checker) after(was scene) (left, broken error) {
	ctx := context.Background()
	var errs, fatal []error
	if err := ground.Poll(ctx, namespacesGone, func() error { return c.namespacesAsBefore(ctx, was) }); err != nil {
		errs = append(errs, err)
	}
	if err := ground.Poll(ctx, nodesBack, func() error { return c.nodesUp(ctx) }); err != nil {
		fatal = append(fatal, err)
	}
	if err := ground.Poll(ctx, operatorBack, func() error { return c.operatorAsBefore(ctx, was) }); err != nil {
		fatal = append(fatal, err)
	}
	return errors.Join(append(errs, fatal...)...), errors.Join(fatal...)
}

func (c *checker) namespacesAsBefore(ctx context.Context, was scene) error {
	list := &corev1.NamespaceList{}
	if err := c.k8s.List(ctx, list); err != nil {
		return err
	}
	var left, gone []string
	now := map[string]bool{}
	for _, ns := range list.Items {
		now[ns.Name] = true
		if !slices.Contains(was.namespaces, ns.Name) {
			left = append(left, fmt.Sprintf("%s (%s)", ns.Name, ns.Status.Phase))
		}
	}
	for _, n := range was.namespaces {
		if !now[n] {
			gone = append(gone, n)
		}
	}
	if len(left) > 0 || len(gone) > 0 {
		return fmt.Errorf("namespaces left behind %v, namespaces removed %v", left, gone)
	}
	return nil
}

func (c *checker) nodesUp(ctx context.Context) error {
	if err := c.g.Healthy(); err != nil {
		return err
	}
	for _, n := range c.g.Nodes {
		if !n.Running() {
			return fmt.Errorf("node %s is stopped", n.Name)
		}
		node := &corev1.Node{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return err
		}
		ready := slices.ContainsFunc(node.Status.Conditions, func(x corev1.NodeCondition) bool {
			return x.Type == corev1.NodeReady && x.Status == corev1.ConditionTrue
		})
		// The node lifecycle's taints (not-ready, unreachable, unschedulable) go once the
		// node is back; the ground sets none of its own.
		tainted := slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return strings.HasPrefix(x.Key, "node.kubernetes.io/") })
		if !ready || node.Spec.Unschedulable || tainted {
			return fmt.Errorf("node %s: Ready %v, unschedulable %v, taints %v", n.Name, ready, node.Spec.Unschedulable, node.Spec.Taints)
		}
	}
	return nil
}

func (c *checker) operatorAsBefore(ctx context.Context, was scene) error {
	if err := c.operatorRolledOut(ctx, was); err != nil {
		return err
	}
	return ground.ProbeWebhooks(ctx, c.g.RESTConfig())
}

// operatorRolledOut returns why the operator's Deployment does not run the pod template
// it had, on every replica.
func (c *checker) operatorRolledOut(ctx context.Context, was scene) error {
	d, err := c.operator(ctx)
	if err != nil {
		return err
	}
	now, err := template(d)
	if err != nil {
		return err
	}
	if now != was.operator {
		return fmt.Errorf("the operator's pod template changed:\nwas %s\nnow %s", was.operator, now)
	}
	if d.Status.AvailableReplicas < 1 || d.Status.UpdatedReplicas != d.Status.Replicas {
		return fmt.Errorf("the operator's Deployment: %d available, %d of %d updated", d.Status.AvailableReplicas,
			d.Status.UpdatedReplicas, d.Status.Replicas)
	}
	return nil
}
