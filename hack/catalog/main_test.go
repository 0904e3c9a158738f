package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
)

func render(t *testing.T, inline bool) *declcfg.DeclarativeConfig {
	t.Helper()
	root := filepath.Join("..", "..")
	out := filepath.Join(t.TempDir(), "catalog.yaml")
	err := run(context.Background(), options{
		template: filepath.Join(root, "config", "catalog", "template.yaml"), bundlesDir: filepath.Join(root, "config", "catalog", "bundles"),
		devBundle: filepath.Join(root, "bundle"), imageRepo: "quay.io/dolphin-operator/dolphin-operator-bundle", out: out, inline: inline})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := declcfg.LoadReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The published catalog refers to bundle images; the inline one carries each bundle's
// manifests and no image, for OLM without a registry. Both describe the same graph.
func TestPublishedAndInlineCatalogsShareTheGraph(t *testing.T) {
	published, inline := render(t, false), render(t, true)
	if len(published.Bundles) < 2 || len(published.Bundles) != len(inline.Bundles) {
		t.Fatalf("bundles: published %d, inline %d", len(published.Bundles), len(inline.Bundles))
	}
	for i, b := range published.Bundles {
		in := inline.Bundles[i]
		if b.Name != in.Name {
			t.Fatalf("bundle %d: %s vs %s", i, b.Name, in.Name)
		}
		if b.Image == "" || in.Image != "" {
			t.Errorf("%s: published image %q, inline image %q", b.Name, b.Image, in.Image)
		}
		if objects(b) != 0 || objects(in) == 0 {
			t.Errorf("%s: olm.bundle.object properties: published %d, inline %d", b.Name, objects(b), objects(in))
		}
	}
	if len(published.Channels) != 3 || len(inline.Channels) != 3 {
		t.Fatalf("channels: published %d, inline %d", len(published.Channels), len(inline.Channels))
	}
	for i, ch := range published.Channels {
		if ch.Name != inline.Channels[i].Name || len(ch.Entries) != len(inline.Channels[i].Entries) {
			t.Errorf("channel %s differs between the two catalogs", ch.Name)
		}
	}
	if published.Packages[0].Icon == nil {
		t.Error("the package has no icon")
	}
}

func objects(b declcfg.Bundle) int {
	n := 0
	for _, p := range b.Properties {
		if p.Type == "olm.bundle.object" {
			n++
		}
	}
	return n
}
