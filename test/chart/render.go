// Package chart renders and lints the Helm chart (charts/dolphin-operator) with the Helm Go
// SDK, as `helm template` and `helm lint` would, and reads config/default's kustomize build
// to compare the two. The unit tests here check the chart without a cluster; the deploy
// tier installs it on one (test/deploy).
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// Dir is the chart's folder in the checkout.
func Dir() string { return filepath.Join(ground.RepoRoot(), "charts", "dolphin-operator") }

// Render renders the chart as `helm template --include-crds` would for a release named
// release in namespace, with vals over the chart's values. The chart's schema is checked.
func Render(release, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(Dir())
	if err != nil {
		return nil, fmt.Errorf("while loading the chart: %w", err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = namespace
	install.IncludeCRDs = true
	// Helm's client-only default (v1.20) is older than the chart's kubeVersion: render for
	// the Kubernetes the test ground runs.
	kube, err := groundKubeVersion()
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kube
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("while rendering the chart: %w", err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("a release of type %T", rel)
	}
	return Decode([]byte(r.Manifest))
}

// groundKubeVersion is the k8s.io/kubernetes version hack/tools/k8s pins (what the test
// ground's control plane is built from).
func groundKubeVersion() (*common.KubeVersion, error) {
	raw, err := os.ReadFile(filepath.Join(ground.RepoRoot(), "hack", "tools", "k8s", "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("while reading the Kubernetes pin: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			return common.ParseKubeVersion(f[1])
		}
	}
	return nil, errors.New("hack/tools/k8s/go.mod pins no k8s.io/kubernetes")
}

// Kustomize returns what `kustomize build config/default` prints (what `make deploy`
// applies), with the kustomize that `make kustomize` builds into $DOLPHIN_BIN_DIR.
func Kustomize() ([]*unstructured.Unstructured, error) {
	bin := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), "kustomize")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no kustomize at %s (make kustomize builds it; DOLPHIN_BIN_DIR names bin/): %w", bin, err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "build", filepath.Join(ground.RepoRoot(), "config", "default"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/default: %w: %s", err, stderr.String())
	}
	return Decode(out)
}

// Decode splits a multi-document YAML stream into objects (apimachinery's reader, as
// kubectl's), skipping empty documents.
func Decode(stream []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, fmt.Errorf("while decoding document %d: %w\n%s", len(objs)+1, err, doc)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
}

// Find returns the object of that kind and name, or nil.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Lint runs `helm lint --strict` on the chart with vals: every warning is an error.
func Lint(vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = "dolphin-system"
	res := l.Run([]string{Dir()}, vals)
	var msgs []string
	for _, m := range res.Messages {
		msgs = append(msgs, m.Error())
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("helm lint: %d errors: %s", len(res.Errors), strings.Join(msgs, "; "))
	}
	return nil
}
