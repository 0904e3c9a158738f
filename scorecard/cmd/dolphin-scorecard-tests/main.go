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
	"slices"
	"sort"
	"strings"
	"sync"
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
	// The API server's warnings (v1alpha1 is deprecated) go into the result's log: client-go
	// would print them to stderr, which scorecard reads with stdout as one log, and the
	// TestStatus JSON would no longer parse.
	warnings := &warningLog{}
	if cfg, err := ctrl.GetConfig(); err == nil {
		cfg.WarningHandler = warnings
		env.Config = cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+time.Minute)
	defer cancel()
	r := tests.All[flag.Arg(0)](ctx, env)
	if w := warnings.String(); w != "" {
		r.Log = strings.TrimSpace(r.Log + "\n" + w)
	}
	status := scapiv1alpha3.TestStatus{Results: []scapiv1alpha3.TestResult{r}}
	out, err := json.MarshalIndent(status, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// warningLog keeps the API server's warnings, each once.
type warningLog struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeader records a warning (rest.WarningHandler).
func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.seen, text) {
		w.seen = append(w.seen, text)
	}
}

func (w *warningLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		return ""
	}
	return "API server warnings: " + strings.Join(w.seen, "; ")
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
