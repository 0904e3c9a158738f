package v1beta1

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// AuditLog is where the validating webhooks write their audit trail: one line per change
// they decide on, under the logger name AuditLogger. Tests substitute it.
var AuditLog = logf.Log

// AuditLogger names the audit lines' logger.
const AuditLogger = "admission-audit"

// maxChanged bounds the fields one audit line names; the rest are counted.
const maxChanged = 40

// audit writes the audit line of one decision: who asked (user, groups), the operation,
// the object, the fields of spec, labels and annotations that the change sets or alters
// (none listed for a creation), whether it was allowed and, if not, why. Status and other
// metadata do not pass the validating webhooks (their rules name the main resource only).
func audit(ctx context.Context, kind string, old, obj client.Object, err error) {
	kv := []any{"kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "allowed", err == nil}
	if req, rerr := admission.RequestFromContext(ctx); rerr == nil {
		kv = append(kv, "operation", string(req.Operation), "user", req.UserInfo.Username, "groups", req.UserInfo.Groups,
			"uid", string(req.UID))
		if req.DryRun != nil && *req.DryRun {
			kv = append(kv, "dryRun", true)
		}
	}
	if old != nil {
		kv = append(kv, "changed", changedFields(old, obj))
	}
	if err != nil {
		kv = append(kv, "reason", err.Error())
	}
	AuditLog.WithName(AuditLogger).Info("Admission decision", kv...)
}

// changedFields lists the paths under spec, metadata.labels and metadata.annotations whose
// values differ between old and obj, sorted; a list that differs is named as a whole.
func changedFields(old, obj client.Object) []string {
	a, b := auditedParts(old), auditedParts(obj)
	var out []string
	diffPaths("", a, b, &out)
	slices.Sort(out)
	if len(out) > maxChanged {
		out = append(out[:maxChanged], fmt.Sprintf("... and %d more", len(out)-maxChanged))
	}
	return out
}

// auditedParts is the object's spec, labels and annotations as generic JSON values.
func auditedParts(o client.Object) map[string]any {
	raw, err := json.Marshal(o)
	if err != nil {
		return map[string]any{}
	}
	var all map[string]any
	if json.Unmarshal(raw, &all) != nil {
		return map[string]any{}
	}
	meta, _ := all["metadata"].(map[string]any)
	out := map[string]any{"spec": all["spec"]}
	if meta != nil {
		out["metadata"] = map[string]any{"labels": meta["labels"], "annotations": meta["annotations"]}
	}
	return out
}

func diffPaths(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	// A map that one side lacks is an empty one: its keys are named one by one.
	if aok && b == nil {
		bm, bok = map[string]any{}, true
	}
	if bok && a == nil {
		am, aok = map[string]any{}, true
	}
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, path)
		}
		return
	}
	for k := range am {
		diffPaths(join(path, k), am[k], bm[k], out)
	}
	for k := range bm {
		if _, seen := am[k]; !seen {
			diffPaths(join(path, k), nil, bm[k], out)
		}
	}
}

// join names key under path: dotted, or in brackets when the key has dots or slashes (a
// label or annotation key, a config variable).
func join(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
