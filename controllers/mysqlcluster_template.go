package controllers

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/apply"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// An operator upgrade restarts no database unless asked. A new release may build the pod
// template differently (another default image, probe, script or my.cnf setting read at
// start); applied as it is, the roll would restart every instance of every cluster. So
// the StatefulSet keeps the template its instances run for as long as the cluster's own
// pod inputs (resources.PodInputs) are unchanged, and the PendingRestart condition says
// what a restart would change. A change of those inputs (the user asked for a restart)
// or spec.updatePolicy.operatorUpgrade Roll applies the template this operator builds,
// which the roll then brings the instances onto, primary last.
//
// The StatefulSet records the inputs and the built template's hash in annotations
// (resources.AnnotationPodInputs, AnnotationPodTemplate). One written by a release that
// recorded neither is adopted: its template is kept and the current inputs recorded, as
// the earlier operator would have applied any spec change before it stopped. A template
// that cannot run under this operator (resources.Keepable: 0.1.0's, whose instances lack
// the operator's accounts) is replaced whatever the policy.

// templateHold is what the StatefulSet's pod template is this pass.
type templateHold struct {
	// held: the live template is kept although this operator builds another.
	held bool
	// changes name what a restart onto the built template would change (held only).
	changes []string
}

// holdTemplate decides, purely, between the template this operator built (desired's) and
// the one the StatefulSet has (live, nil when there is none), and changes desired to
// what is to be applied.
func holdTemplate(desired, live *appsv1.StatefulSet, policy mysqlv1beta1.OperatorUpgradePolicy) templateHold {
	if live == nil || policy == mysqlv1beta1.OperatorUpgradeRoll {
		return templateHold{}
	}
	inputs := live.Annotations[resources.AnnotationPodInputs]
	if inputs != "" && inputs != desired.Annotations[resources.AnnotationPodInputs] {
		return templateHold{} // the user's change: onto the new template
	}
	if !resources.Keepable(&live.Spec.Template) {
		return templateHold{} // it cannot run under this operator (0.1.0's)
	}
	liveHash := live.Annotations[resources.AnnotationPodTemplate]
	if liveHash != "" && liveHash == desired.Annotations[resources.AnnotationPodTemplate] {
		return templateHold{} // built as before: applying it changes nothing
	}
	// Kept as it is, defaults and all: applying the built template instead would also
	// remove what the earlier operator set and this one does not, a change of its own.
	built := desired.Spec.Template
	differs := liveHash != "" || !subset(&built, &live.Spec.Template) // unrecorded: compare what built sets
	desired.Spec.Template = *live.Spec.Template.DeepCopy()
	desired.Annotations[resources.AnnotationPodTemplate] = liveHash
	if !differs {
		return templateHold{}
	}
	changes := templateChanges(&built, &live.Spec.Template)
	if len(changes) == 0 {
		changes = []string{"the pod template"} // a field removed: nothing to name it by
	}
	return templateHold{held: true, changes: changes}
}

// templateChanges names the parts of the live template that differ from what built sets:
// a container's image (with both), one of its parts, a container added or removed, the
// volumes, the my.cnf read at start, the pod's other settings or metadata.
func templateChanges(built, live *corev1.PodTemplateSpec) []string {
	var out []string
	out = append(out, containerChanges("init container", built.Spec.InitContainers, live.Spec.InitContainers)...)
	out = append(out, containerChanges("container", built.Spec.Containers, live.Spec.Containers)...)
	if !subset(built.Spec.Volumes, live.Spec.Volumes) || len(built.Spec.Volumes) != len(live.Spec.Volumes) {
		out = append(out, "the volumes")
	}
	b, l := built.Annotations[resources.AnnotationConfigHash], live.Annotations[resources.AnnotationConfigHash]
	if b != l {
		out = append(out, "the my.cnf settings read at start")
	}
	bs, ls := built.Spec.DeepCopy(), live.Spec.DeepCopy()
	bs.Containers, bs.InitContainers, bs.Volumes = nil, nil, nil
	ls.Containers, ls.InitContainers, ls.Volumes = nil, nil, nil
	if !subset(bs, ls) {
		out = append(out, "the pod's settings")
	}
	bm, lm := built.ObjectMeta.DeepCopy(), live.ObjectMeta.DeepCopy()
	delete(bm.Annotations, resources.AnnotationConfigHash)
	delete(lm.Annotations, resources.AnnotationConfigHash)
	if !subset(bm, lm) {
		out = append(out, "the pod's labels or annotations")
	}
	return out
}

// containerChanges compares containers by name.
func containerChanges(kind string, built, live []corev1.Container) []string {
	var out []string
	for _, b := range built {
		i := slices.IndexFunc(live, func(l corev1.Container) bool { return l.Name == b.Name })
		if i < 0 {
			out = append(out, fmt.Sprintf("%s %s added", kind, b.Name))
			continue
		}
		l := live[i]
		if b.Image != l.Image {
			out = append(out, fmt.Sprintf("image of %s %s: %s -> %s", kind, b.Name, l.Image, b.Image))
		}
		parts := []struct {
			name       string
			built, liv any
		}{
			{"command and arguments", [][]string{b.Command, b.Args}, [][]string{l.Command, l.Args}},
			{"environment", b.Env, l.Env},
			{"resources", b.Resources, l.Resources},
			{"ports", b.Ports, l.Ports},
			{"volume mounts", b.VolumeMounts, l.VolumeMounts},
			{"startup probe", b.StartupProbe, l.StartupProbe},
			{"liveness probe", b.LivenessProbe, l.LivenessProbe},
			{"readiness probe", b.ReadinessProbe, l.ReadinessProbe},
			{"security context", b.SecurityContext, l.SecurityContext},
		}
		for _, p := range parts {
			if !subset(p.built, p.liv) {
				out = append(out, fmt.Sprintf("%s of %s %s", p.name, kind, b.Name))
			}
		}
	}
	for _, l := range live {
		if !slices.ContainsFunc(built, func(b corev1.Container) bool { return b.Name == l.Name }) {
			out = append(out, fmt.Sprintf("%s %s removed", kind, l.Name))
		}
	}
	return out
}

// subset reports whether every field built sets has the same value in live, which the
// API server has filled with defaults: the apply helper's comparison, on any value.
func subset(built, live any) bool {
	b, errB := toValue(built)
	l, errL := toValue(live)
	if errB != nil || errL != nil {
		return false // not comparable: count it as a change
	}
	return apply.Subset(b, l)
}

// toValue is v as plain JSON values (maps, slices, strings, numbers), as the apply
// helper compares them.
func toValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("while comparing templates: %w", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("while comparing templates: %w", err)
	}
	return out, nil
}
