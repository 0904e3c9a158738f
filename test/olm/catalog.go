package olm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Template is a basic catalog template (config/catalog/template.yaml's schema) held as
// plain data, so a test can publish what a release manager would: promote a version to a
// channel, or drop old versions from it.
type Template struct {
	Schema  string           `json:"schema"`
	Entries []map[string]any `json:"entries"`
}

// ReadTemplate reads a basic catalog template.
func ReadTemplate(path string) (*Template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading the catalog template: %w", err)
	}
	t := &Template{}
	if err := yaml.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("while parsing %s: %w", path, err)
	}
	return t, nil
}

func (t *Template) channel(name string) (map[string]any, error) {
	for _, e := range t.Entries {
		if e["schema"] == "olm.channel" && e["name"] == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("the template has no channel %q", name)
}

// entry returns bundle's entry in channel name.
func (t *Template) entry(name, bundle string) (map[string]any, error) {
	ch, err := t.channel(name)
	if err != nil {
		return nil, err
	}
	entries, _ := ch["entries"].([]any)
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok && m["name"] == bundle {
			return m, nil
		}
	}
	return nil, fmt.Errorf("channel %s has no entry %q", name, bundle)
}

// Promote copies bundle's entry (with its upgrade edges) from channel from to the end of
// each of the channels to: the release of a version that was in candidate.
func (t *Template) Promote(bundle, from string, to ...string) error {
	entry, err := t.entry(from, bundle)
	if err != nil {
		return err
	}
	for _, name := range to {
		ch, err := t.channel(name)
		if err != nil {
			return err
		}
		entries, _ := ch["entries"].([]any)
		ch["entries"] = append(entries, entry)
	}
	return nil
}

// OnlyHead reduces the package to one channel holding only bundle's entry from that
// channel, reached from older versions by its skipRange alone: no replaces, and no older
// bundle in the catalog. A subscription at an older version must upgrade through it.
func (t *Template) OnlyHead(channel, bundle string) error {
	// A bundle's image is tagged with its version: dolphin-operator.v0.2.0 -> ...:v0.2.0.
	tag := ":" + bundle[strings.LastIndex(bundle, ".v")+1:]
	entry, err := t.entry(channel, bundle)
	if err != nil {
		return err
	}
	if entry["skipRange"] == nil {
		return fmt.Errorf("entry %s of channel %s has no skipRange", bundle, channel)
	}
	head := map[string]any{"name": bundle, "skipRange": entry["skipRange"]}
	kept := []map[string]any{}
	for _, e := range t.Entries {
		switch e["schema"] {
		case "olm.package":
			e["defaultChannel"] = channel
			kept = append(kept, e)
		case "olm.channel":
			if e["name"] == channel {
				e["entries"] = []any{head}
				kept = append(kept, e)
			}
		case "olm.bundle":
			if image, _ := e["image"].(string); strings.HasSuffix(image, tag) {
				kept = append(kept, e)
			}
		}
	}
	t.Entries = kept
	return nil
}

// Render writes the catalog the template describes into dir/dolphin-operator/catalog.yaml
// with catalog-render (hack/catalog), as `make catalog` renders catalog/: each bundle
// referenced by its image, which OLM unpacks with a Job. The bundles are the repository's.
func (t *Template) Render(ctx context.Context, renderBin, repoRoot, dir string) error {
	raw, err := yaml.Marshal(t)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "dolphin-operator"), 0o755); err != nil {
		return err
	}
	tmpl := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-template.yaml")
	if err := os.WriteFile(tmpl, raw, 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, renderBin, "--template", tmpl,
		"--bundles", filepath.Join(repoRoot, "config", "catalog", "bundles"),
		"--dev-bundle", filepath.Join(repoRoot, "bundle"),
		"--out", filepath.Join(dir, "dolphin-operator", "catalog.yaml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("catalog-render: %w\n%s", err, out)
	}
	return nil
}

// SetCatalogSource creates the CatalogSource name in OLM's namespace serving the catalog
// image, or points the existing one at it (publishing a new catalog), and waits until OLM
// runs the image's registry pod and its catalog operator is connected to it.
func (m *OLM) SetCatalogSource(ctx context.Context, name, image string) (time.Duration, error) {
	start := time.Now()
	cs := &operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}
	err := m.k8s.Get(ctx, client.ObjectKeyFromObject(cs), cs)
	switch {
	case apierrors.IsNotFound(err):
		cs.Spec = operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Image: image,
			DisplayName: "Dolphin (test catalog)", Publisher: "Dolphin"}
		err = m.k8s.Create(ctx, cs)
	case err == nil:
		patch := client.MergeFrom(cs.DeepCopy())
		cs.Spec.Image = image
		err = m.k8s.Patch(ctx, cs, patch)
	}
	if err != nil {
		return 0, fmt.Errorf("while setting CatalogSource %s to %s: %w", name, image, err)
	}
	err = poll(ctx, 3*time.Minute, "CatalogSource "+name+" to be READY on "+image, func() error {
		if err := m.onlyRegistryPod(ctx, name, image); err != nil {
			return err
		}
		if err := m.k8s.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
			return err
		}
		st := cs.Status.GRPCConnectionState
		if st == nil || st.LastObservedState != "READY" {
			return fmt.Errorf("connection state %+v", st)
		}
		return nil
	})
	return time.Since(start), err
}

// onlyRegistryPod checks that the one registry pod of CatalogSource name runs image and is
// ready: OLM replaces the pod when the image changes, and until the old one is gone the
// Service may still send the catalog operator to it.
func (m *OLM) onlyRegistryPod(ctx context.Context, name, image string) error {
	pods := &corev1.PodList{}
	if err := m.k8s.List(ctx, pods, client.InNamespace(Namespace), client.MatchingLabels{"olm.catalogSource": name}); err != nil {
		return err
	}
	if len(pods.Items) != 1 {
		return fmt.Errorf("%d registry pods", len(pods.Items))
	}
	p := pods.Items[0]
	if p.Spec.Containers[0].Image != image || p.DeletionTimestamp != nil {
		return fmt.Errorf("registry pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("registry pod %s is not ready (%s)", p.Name, p.Status.Phase)
}
