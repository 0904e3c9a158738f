// Command dolphin-scorecard-tests runs one of Dolphin's scorecard tests and prints its
// scorecard v1alpha3 TestStatus as JSON, as scorecard expects of a test image:
//
//	dolphin-scorecard-tests dolphin-sample-ready
//
// In a scorecard pod the bundle is at /bundle and the cluster is the pod's own; outside,
// --bundle and KUBECONFIG say where they are.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dolphin-operator/dolphin/scorecard/tests"
)

func main() {
	bundle := flag.String("bundle", "/bundle", "the bundle folder")
	namespace := flag.String("namespace", namespaceDefault(), "namespace for the objects a test creates")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long a test waits for the cluster")
	flag.Parse()
	if flag.NArg() != 1 || tests.All[flag.Arg(0)] == nil {
		names := make([]string, 0, len(tests.All))
		for n := range tests.All {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: dolphin-scorecard-tests [flags] TEST\ntests: %s\n", strings.Join(names, ", "))
		os.Exit(2)
	}
	env := tests.Env{BundleDir: *bundle, Namespace: *namespace, Timeout: *timeout}
	if cfg, err := ctrl.GetConfig(); err == nil {
		env.Config = cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+time.Minute)
	defer cancel()
	status := scapiv1alpha3.TestStatus{Results: []scapiv1alpha3.TestResult{tests.All[flag.Arg(0)](ctx, env)}}
	out, err := json.MarshalIndent(status, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// namespaceDefault is the pod's own namespace in a scorecard pod, else "default".
func namespaceDefault() string {
	if ns := os.Getenv("SCORECARD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "default"
}
