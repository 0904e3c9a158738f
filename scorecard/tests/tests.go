package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Env is what a test may use.
type Env struct {
	// BundleDir is the bundle (manifests/, metadata/).
	BundleDir string
	// Config reaches the cluster; nil for tests that need none.
	Config *rest.Config
	// Namespace to create objects in.
	Namespace string
	// Timeout bounds each wait.
	Timeout time.Duration
}

// Test is one scorecard test.
type Test func(context.Context, Env) scapiv1alpha3.TestResult

// All are the tests by the name scorecard's configuration uses.
var All = map[string]Test{
	"dolphin-descriptors-cover-crds": DescriptorsCoverCRDs,
	"dolphin-sample-ready":           SampleReady,
	"dolphin-conversion-roundtrip":   ConversionRoundTrip,
}

func result(name string, err error, log string) scapiv1alpha3.TestResult {
	r := scapiv1alpha3.TestResult{Name: name, State: scapiv1alpha3.PassState, Log: log,
		CreationTimestamp: metav1.Now()}
	if err != nil {
		r.State = scapiv1alpha3.FailState
		r.Errors = []string{err.Error()}
	}
	return r
}

// readBundle returns the bundle's CSV and CRDs.
func readBundle(dir string) (*operatorsv1alpha1.ClusterServiceVersion, []apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	if err != nil {
		return nil, nil, fmt.Errorf("while listing %s/manifests: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no manifests in %s/manifests", dir)
	}
	var csv *operatorsv1alpha1.ClusterServiceVersion
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("while reading %s: %w", f, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		switch tm.Kind {
		case "ClusterServiceVersion":
			csv = &operatorsv1alpha1.ClusterServiceVersion{}
			if err := yaml.Unmarshal(raw, csv); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
		case "CustomResourceDefinition":
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			crds = append(crds, crd)
		}
	}
	if csv == nil {
		return nil, nil, errors.New("the bundle has no ClusterServiceVersion")
	}
	return csv, crds, nil
}

// DescriptorsCoverCRDs checks that every top-level spec field of every served version of
// every owned CRD has a spec descriptor in the CSV, so the console can show it.
func DescriptorsCoverCRDs(_ context.Context, env Env) scapiv1alpha3.TestResult {
	const name = "dolphin-descriptors-cover-crds"
	csv, crds, err := readBundle(env.BundleDir)
	if err != nil {
		return result(name, err, "")
	}
	var missing []string
	checked := 0
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			desc := ownedDescription(csv, crd.Spec.Names.Kind, v.Name)
			if desc == nil {
				missing = append(missing, fmt.Sprintf("%s %s: not an owned CRD of the CSV", crd.Spec.Names.Kind, v.Name))
				continue
			}
			for field := range v.Schema.OpenAPIV3Schema.Properties["spec"].Properties {
				checked++
				if !hasSpecDescriptor(desc, field) {
					missing = append(missing, fmt.Sprintf("%s %s: spec.%s", crd.Spec.Names.Kind, v.Name, field))
				}
			}
		}
	}
	if len(missing) > 0 {
		return result(name, fmt.Errorf("no spec descriptor for: %s", strings.Join(missing, "; ")), "")
	}
	return result(name, nil, fmt.Sprintf("%d spec fields in %d CRDs have descriptors", checked, len(crds)))
}

func ownedDescription(csv *operatorsv1alpha1.ClusterServiceVersion, kind, version string) *operatorsv1alpha1.CRDDescription {
	for k, o := range csv.Spec.CustomResourceDefinitions.Owned {
		if o.Kind == kind && o.Version == version {
			return &csv.Spec.CustomResourceDefinitions.Owned[k]
		}
	}
	return nil
}

func hasSpecDescriptor(d *operatorsv1alpha1.CRDDescription, field string) bool {
	for _, s := range d.SpecDescriptors {
		if s.Path == field || strings.HasPrefix(s.Path, field+".") {
			return true
		}
	}
	return false
}

// almExample returns the CSV's example of the given apiVersion and kind.
func almExample(csv *operatorsv1alpha1.ClusterServiceVersion, apiVersion, kind string) (*unstructured.Unstructured, error) {
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		return nil, fmt.Errorf("alm-examples is not a JSON list: %w", err)
	}
	for _, e := range examples {
		if e["apiVersion"] == apiVersion && e["kind"] == kind {
			return &unstructured.Unstructured{Object: e}, nil
		}
	}
	return nil, fmt.Errorf("alm-examples has no %s %s", apiVersion, kind)
}

var clusters = schema.GroupVersionResource{Group: "mysql.dolphin-operator.io", Resource: "mysqlclusters"}

// SampleReady creates the v1beta1 MySQLCluster example and waits for its Ready condition.
func SampleReady(ctx context.Context, env Env) scapiv1alpha3.TestResult {
	const name = "dolphin-sample-ready"
	start := time.Now()
	ex, err := createExample(ctx, env, "v1beta1")
	if err != nil {
		return result(name, err, "")
	}
	defer ex.delete()
	var last string
	for time.Since(start) < env.Timeout {
		got, err := ex.res.Get(ctx, ex.obj.GetName(), metav1.GetOptions{})
		if err == nil {
			last = conditionSummary(got)
			if strings.Contains(last, "Ready=True") {
				return result(name, nil, fmt.Sprintf("%s Ready after %s (%s)", got.GetName(), time.Since(start).Round(100*time.Millisecond), last))
			}
		}
		time.Sleep(time.Second)
	}
	return result(name, fmt.Errorf("the sample was not Ready after %s; conditions: %s", env.Timeout, last), "")
}

func conditionSummary(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		part := fmt.Sprintf("%v=%v", m["type"], m["status"])
		// A condition that is not as it should be says why.
		bad := m["status"] != "True"
		switch m["type"] {
		case "Degraded":
			bad = m["status"] == "True"
		case "Progressing":
			bad = false
		}
		if bad && m["message"] != "" {
			part += fmt.Sprintf(" (%v: %v)", m["reason"], m["message"])
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

// ConversionRoundTrip creates the v1alpha1 example, reads it as v1beta1 and back as
// v1alpha1, and checks the v1alpha1 spec came back unchanged.
func ConversionRoundTrip(ctx context.Context, env Env) scapiv1alpha3.TestResult {
	const name = "dolphin-conversion-roundtrip"
	ex, err := createExample(ctx, env, "v1alpha1")
	if err != nil {
		return result(name, err, "")
	}
	defer ex.delete()
	sample, old := ex.obj, ex.res
	hub := ex.dyn.Resource(clusters.GroupResource().WithVersion("v1beta1")).Namespace(env.Namespace)
	asHub, err := hub.Get(ctx, sample.GetName(), metav1.GetOptions{})
	if err != nil {
		return result(name, fmt.Errorf("while reading it as v1beta1: %w", err), "")
	}
	instances := number(asHub.Object, "spec", "instances")
	replicas := number(sample.Object, "spec", "replicas")
	if instances != replicas || replicas == 0 {
		return result(name, fmt.Errorf("v1beta1 spec.instances is %d, the v1alpha1 spec.replicas was %d", instances, replicas), "")
	}
	back, err := old.Get(ctx, sample.GetName(), metav1.GetOptions{})
	if err != nil {
		return result(name, fmt.Errorf("while reading it back as v1alpha1: %w", err), "")
	}
	// Compared as JSON: the sample's numbers were decoded as floats, the server's as integers.
	wrote, _ := json.Marshal(sample.Object["spec"])
	read, _ := json.Marshal(back.Object["spec"])
	if string(wrote) != string(read) {
		return result(name, fmt.Errorf("the v1alpha1 spec changed: wrote %v, read %v", sample.Object["spec"], back.Object["spec"]), "")
	}
	return result(name, nil, "v1alpha1 -> v1beta1 -> v1alpha1 kept the spec; v1beta1 spec.instances = "+fmt.Sprint(instances))
}

// number reads a numeric field whether it was decoded as an integer (from the API server)
// or a float (from the CSV's JSON).
func number(obj map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// example is a CSV example created in the test's namespace.
type example struct {
	dyn dynamic.Interface
	obj *unstructured.Unstructured
	res dynamic.ResourceInterface
}

// createExample creates the CSV's MySQLCluster example of the given version in
// env.Namespace, named scorecard-<example name>.
func createExample(ctx context.Context, env Env, version string) (*example, error) {
	dyn, csv, err := clientAndCSV(env)
	if err != nil {
		return nil, err
	}
	obj, err := almExample(csv, "mysql.dolphin-operator.io/"+version, "MySQLCluster")
	if err != nil {
		return nil, err
	}
	res := dyn.Resource(clusters.GroupResource().WithVersion(version)).Namespace(env.Namespace)
	obj.SetNamespace(env.Namespace)
	obj.SetName("scorecard-" + obj.GetName())
	if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("while creating the %s sample: %w", version, err)
	}
	return &example{dyn: dyn, obj: obj, res: res}, nil
}

// delete removes the example; the namespace's deletion would too, so a failure is ignored.
func (e *example) delete() {
	_ = e.res.Delete(context.Background(), e.obj.GetName(), metav1.DeleteOptions{})
}

func clientAndCSV(env Env) (dynamic.Interface, *operatorsv1alpha1.ClusterServiceVersion, error) {
	if env.Config == nil {
		return nil, nil, errors.New("no cluster to talk to")
	}
	csv, _, err := readBundle(env.BundleDir)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("while creating a client: %w", err)
	}
	return dyn, csv, nil
}
