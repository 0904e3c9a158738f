package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/version"
)

// reportTimeout bounds a whole report; each log read has requestTimeout of its own.
const reportTimeout = 5 * time.Minute

// operatorPodLabel selects the operator's pods, as its manifests label them (make deploy,
// the bundle's Deployment, the chart).
const operatorPodLabel = "app.kubernetes.io/name=dolphin-operator"

func newReportCommand(o *options) *cobra.Command {
	var out, operatorNS string
	var tail int64
	cmd := &cobra.Command{
		Use:   "report CLUSTER",
		Short: "Write a tarball for a support case: the cluster, its children, pods, logs, events, the operator's log lines about it",
		Long: "report gathers what a support case needs into a .tar.gz: the cluster and every object the\n" +
			"operator made for it (Secrets with their values replaced), its pods and their logs, the\n" +
			"Events of all of them, the primary Lease, the operator's log lines that name the cluster\n" +
			"and the status command's output. Every value of the cluster's Secrets is replaced\n" +
			"wherever it appears. What could not be read is listed in MANIFEST.txt, not fatal.",
		Args: exactArgs("CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail <= 0 {
				return usageErrorf("--tail %d: want a positive number of lines", tail)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), reportTimeout)
			defer cancel()
			if out == "" {
				out = fmt.Sprintf("report-%s-%s-%s.tar.gz", o.namespace, args[0], o.now().UTC().Format("20060102T150405Z"))
			}
			r := &reporter{o: o, tail: tail, operatorNS: operatorNS}
			if err := r.gather(ctx, args[0]); err != nil {
				return err
			}
			if err := r.write(out); err != nil {
				return err
			}
			fmt.Fprintf(o.io.Out, "Wrote %s: %d files", out, len(r.files))
			if len(r.missing) > 0 {
				fmt.Fprintf(o.io.Out, "; %d things could not be read (MANIFEST.txt lists them)", len(r.missing))
			}
			fmt.Fprintln(o.io.Out, ".")
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "file", "f", "", "the tarball to write (default report-<namespace>-<cluster>-<time>.tar.gz)")
	cmd.Flags().Int64Var(&tail, "tail", 2000, "log lines to keep of each container")
	cmd.Flags().StringVar(&operatorNS, "operator-namespace", "", "where the operator runs (default: look in every namespace)")
	return cmd
}

// reporter gathers a report's files; a part it cannot read is noted, not fatal.
type reporter struct {
	o          *options
	tail       int64
	operatorNS string

	cluster *mysqlv1beta1.MySQLCluster
	files   []reportFile
	missing []string
	// secrets are the values of the cluster's Secrets: replaced in every file.
	secrets [][]byte
	// names are the objects whose Events and operator log lines belong in the report.
	names map[string]bool
}

type reportFile struct {
	name string
	data []byte
}

func (r *reporter) add(name string, data []byte) {
	r.files = append(r.files, reportFile{name: name, data: data})
}

func (r *reporter) miss(what string, err error) {
	r.missing = append(r.missing, what+": "+err.Error())
}

// addObject writes an object as YAML, without its managed fields.
func (r *reporter) addObject(dir string, obj client.Object) {
	obj.SetManagedFields(nil)
	if gvk, err := apiutil.GVKForObject(obj, r.o.client.Scheme()); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		r.miss(dir+"/"+obj.GetName(), err)
		return
	}
	r.names[obj.GetName()] = true
	r.add(dir+"/"+obj.GetName()+".yaml", b)
}

func (r *reporter) gather(ctx context.Context, name string) error {
	c, err := r.o.getCluster(ctx, name)
	if err != nil {
		return err
	}
	r.cluster, r.names = c, map[string]bool{}
	r.addObject("cluster", c.DeepCopy())
	r.children(ctx)
	r.referencedSecrets(ctx)
	r.backups(ctx)
	lease := &coordinationv1.Lease{}
	if err := r.o.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PrimaryLeaseName(c)}, lease); err != nil {
		r.miss("lease "+resources.PrimaryLeaseName(c), apiError("get", "leases", c.Namespace, resources.PrimaryLeaseName(c), err))
	} else {
		r.addObject("lease", lease)
	}
	pods := r.pods(ctx)
	r.events(ctx)
	r.podLogs(ctx, pods)
	r.operatorLogs(ctx)
	// What status prints, from the cluster and pods read above.
	var status bytes.Buffer
	sub := *r.o
	sub.io.Out, sub.color = &status, false
	if err := sub.printReport(sub.reportOf(ctx, c, pods), ""); err != nil {
		r.miss("status", err)
	} else {
		r.add("status.txt", status.Bytes())
	}
	return nil
}

// children writes every object the operator labels as the cluster's; Secrets' values are
// kept only to be replaced elsewhere.
func (r *reporter) children(ctx context.Context) {
	c := r.cluster
	lists := map[string]client.ObjectList{
		"statefulsets": &appsv1.StatefulSetList{}, "deployments": &appsv1.DeploymentList{},
		"services": &corev1.ServiceList{}, "configmaps": &corev1.ConfigMapList{}, "secrets": &corev1.SecretList{},
		"persistentvolumeclaims": &corev1.PersistentVolumeClaimList{}, "poddisruptionbudgets": &policyv1.PodDisruptionBudgetList{},
		"jobs": &batchv1.JobList{}, "networkpolicies": &networkingv1.NetworkPolicyList{},
	}
	for _, resource := range slices.Sorted(maps.Keys(lists)) {
		list := lists[resource]
		if err := r.o.client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
			r.miss(resource, apiError("list", resource, c.Namespace, "", err))
			continue
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			r.miss(resource, err)
			continue
		}
		for _, o := range objs {
			obj, ok := o.(client.Object)
			if !ok {
				continue
			}
			if s, ok := obj.(*corev1.Secret); ok {
				r.redactSecret(s)
			}
			r.addObject(resource, obj)
		}
	}
}

// redactSecret keeps a Secret's keys and sizes (as readable stringData) and remembers its
// values.
func (r *reporter) redactSecret(s *corev1.Secret) {
	sizes := map[string]string{}
	for k, v := range s.Data {
		r.secrets = append(r.secrets, slices.Clone(v))
		sizes[k] = fmt.Sprintf("REDACTED (%d bytes)", len(v))
	}
	for k, v := range s.StringData {
		r.secrets = append(r.secrets, []byte(v))
		sizes[k] = fmt.Sprintf("REDACTED (%d bytes)", len(v))
	}
	s.Data, s.StringData = nil, sizes
	delete(s.Annotations, corev1.LastAppliedConfigAnnotation)
}

// referencedSecrets reads the Secrets the spec names that the operator did not make (object
// storage credentials and CA, a TLS Secret) only to replace their values; they are not
// written.
func (r *reporter) referencedSecrets(ctx context.Context) {
	c := r.cluster
	var names []string
	if c.Spec.TLS.SecretName != "" {
		names = append(names, c.Spec.TLS.SecretName)
	}
	if b := c.Spec.Backup; b != nil && b.Target != nil && b.Target.S3 != nil {
		names = append(names, b.Target.S3.CredentialsSecret.Name)
		if b.Target.S3.CASecret != nil {
			names = append(names, b.Target.S3.CASecret.Name)
		}
	}
	if bs := c.Spec.Bootstrap; bs != nil && bs.FromBackup != nil && bs.FromBackup.Source != nil {
		names = append(names, bs.FromBackup.Source.S3.CredentialsSecret.Name)
	}
	for _, name := range names {
		s := &corev1.Secret{}
		if err := r.o.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
			r.miss("secret "+name+" (read only to replace its values)", apiError("get", "secrets", c.Namespace, name, err))
			continue
		}
		r.redactSecret(s)
	}
}

func (r *reporter) backups(ctx context.Context) {
	list := &mysqlv1beta1.MySQLBackupList{}
	if err := r.o.client.List(ctx, list, client.InNamespace(r.cluster.Namespace)); err != nil {
		r.miss("mysqlbackups", apiError("list", "mysqlbackups", r.cluster.Namespace, "", err))
		return
	}
	for i := range list.Items {
		if list.Items[i].Spec.Cluster == r.cluster.Name {
			r.addObject("mysqlbackups", &list.Items[i])
		}
	}
}

func (r *reporter) pods(ctx context.Context) []corev1.Pod {
	c := r.cluster
	list := &corev1.PodList{}
	if err := r.o.client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		r.miss("pods", apiError("list", "pods", c.Namespace, "", err))
		return nil
	}
	for i := range list.Items {
		r.addObject("pods", list.Items[i].DeepCopy())
	}
	return list.Items
}

// events writes the namespace's Events about the cluster and the objects of the report.
func (r *reporter) events(ctx context.Context) {
	list := &corev1.EventList{}
	if err := r.o.client.List(ctx, list, client.InNamespace(r.cluster.Namespace)); err != nil {
		r.miss("events", apiError("list", "events", r.cluster.Namespace, "", err))
		return
	}
	var evs []corev1.Event
	for _, e := range list.Items {
		if r.names[e.InvolvedObject.Name] {
			e.ManagedFields = nil
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b corev1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	b, err := yaml.Marshal(evs)
	if err != nil {
		r.miss("events", err)
		return
	}
	r.add("events.yaml", b)
}

func (r *reporter) podLogs(ctx context.Context, pods []corev1.Pod) {
	for _, pod := range pods {
		statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			r.log(ctx, "logs/"+pod.Name+"/"+cs.Name+".log", pod.Namespace, pod.Name, cs.Name, false, r.tail, nil)
			if cs.RestartCount > 0 {
				r.log(ctx, "logs/"+pod.Name+"/"+cs.Name+".previous.log", pod.Namespace, pod.Name, cs.Name, true, r.tail, nil)
			}
		}
	}
}

// log writes a container's log, only the lines keep accepts when it is set.
func (r *reporter) log(ctx context.Context, file, ns, pod, container string, previous bool, tail int64, keep func(string) bool) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	b, err := r.o.logs.Logs(ctx, ns, pod, container, previous, tail)
	if err != nil {
		r.miss(file, apiError("get", "pods/log", ns, pod, err))
		return
	}
	if keep != nil {
		var kept bytes.Buffer
		for line := range strings.SplitSeq(string(b), "\n") {
			if keep(line) {
				kept.WriteString(line + "\n")
			}
		}
		b = kept.Bytes()
	}
	r.add(file, b)
}

// operatorLogs writes the operator's log lines that name the cluster or one of its objects.
func (r *reporter) operatorLogs(ctx context.Context) {
	list := &corev1.PodList{}
	sel, err := labels.Parse(operatorPodLabel)
	if err != nil {
		r.miss("operator logs", err)
		return
	}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	if r.operatorNS != "" {
		opts = append(opts, client.InNamespace(r.operatorNS))
	}
	if err := r.o.client.List(ctx, list, opts...); err != nil {
		hint := ""
		if apierrors.IsForbidden(err) && r.operatorNS == "" {
			hint = " (name the operator's namespace with --operator-namespace)"
		}
		r.miss("operator logs", fmt.Errorf("%w%s", apiError("list", "pods", r.operatorNS, "", err), hint))
		return
	}
	if len(list.Items) == 0 {
		r.miss("operator logs", fmt.Errorf("no pod labelled %s", operatorPodLabel))
	}
	c := r.cluster
	keep := func(line string) bool {
		if strings.Contains(line, `"`+c.Namespace+"/"+c.Name+`"`) {
			return true
		}
		if !strings.Contains(line, `"namespace":"`+c.Namespace+`"`) {
			return false
		}
		for n := range r.names {
			if strings.Contains(line, `"name":"`+n+`"`) {
				return true
			}
		}
		return false
	}
	for _, pod := range list.Items {
		for _, ctr := range pod.Spec.Containers {
			r.log(ctx, "operator/"+pod.Namespace+"/"+pod.Name+"/"+ctr.Name+".log", pod.Namespace, pod.Name, ctr.Name, false,
				max(r.tail, 20000), keep)
		}
	}
}

// minRedacted is the shortest Secret value replaced in the files: a shorter one (a user
// name such as "repl") would blank out ordinary words, and the operator's generated
// passwords are far longer.
const minRedacted = 6

// redact replaces every remembered Secret value, as is and base64-encoded, in b.
func (r *reporter) redact(b []byte) []byte {
	for _, v := range r.secrets {
		if len(v) < minRedacted {
			continue
		}
		b = bytes.ReplaceAll(b, v, []byte("REDACTED"))
		b = bytes.ReplaceAll(b, []byte(base64.StdEncoding.EncodeToString(v)), []byte("REDACTED"))
	}
	return b
}

// write puts the files, redacted, and MANIFEST.txt into a gzipped tarball at path (written
// beside it first, so a failed run leaves no half a tarball under the name).
func (r *reporter) write(path string) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz") + "/"
	now := r.o.now()
	var manifest strings.Builder
	fmt.Fprintf(&manifest, "Report of MySQLCluster %s/%s, %s, kubectl-dolphin %s\n\nFiles:\n",
		r.cluster.Namespace, r.cluster.Name, now.UTC().Format(time.RFC3339), version.Version)
	for _, f := range r.files {
		fmt.Fprintf(&manifest, "  %s (%d bytes)\n", f.name, len(f.data))
	}
	if len(r.missing) > 0 {
		manifest.WriteString("\nNot read:\n")
		for _, m := range r.missing {
			manifest.WriteString("  " + m + "\n")
		}
	}
	fmt.Fprintf(&manifest, "\nEvery value of the cluster's Secrets of at least %d bytes is replaced by REDACTED in every file.\n", minRedacted)
	files := append([]reportFile{{name: "MANIFEST.txt", data: []byte(manifest.String())}}, r.files...)
	for _, f := range files {
		data := r.redact(f.data)
		if err := tw.WriteHeader(&tar.Header{Name: dir + f.name, Mode: 0o600, Size: int64(len(data)), ModTime: now,
			Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("while writing the report: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("while writing the report: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("while writing the report: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("while writing the report: %w", err)
	}
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("while writing the report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("while writing the report: %w", err)
	}
	return nil
}

// logSource reads a container's log.
type logSource interface {
	Logs(ctx context.Context, namespace, pod, container string, previous bool, tail int64) ([]byte, error)
}

// maxLogBytes bounds one container's log in a report.
const maxLogBytes = 16 << 20

// podLogs reads logs through the API server (the "get" verb on "pods/log").
type podLogs struct {
	pods corev1client.PodsGetter
}

func (p *podLogs) Logs(ctx context.Context, namespace, pod, container string, previous bool, tail int64) ([]byte, error) {
	return p.pods.Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous,
		TailLines: &tail, LimitBytes: new(int64(maxLogBytes)), Timestamps: true}).DoRaw(ctx)
}
