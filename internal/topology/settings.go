package topology

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// SettingsRetry is how long after setting an instance's online settings the same values are
// set again when it still runs others: mysqld may round or clamp a value (a buffer size to
// its block, max_connections to what its open-files limit allows), and the value read back
// then never equals the spec's.
const SettingsRetry = 5 * time.Minute

// settingsTry is the last time an instance's online settings were set, and to what.
type settingsTry struct {
	at   time.Time
	want string
}

// checkSettings reads the instance's online settings (spec.mysql.config keys the operator
// sets with SET GLOBAL) and records those that differ from the spec in inst.Settings, unless
// the same values were set less than SettingsRetry ago.
func (m *Manager) checkSettings(ctx context.Context, cl *cluster, conn mysql.Instance, inst *Instance) error {
	want := resources.OnlineConfig(cl.obj)
	if len(want) == 0 {
		return nil
	}
	live, err := conn.Variables(ctx, slices.Sorted(maps.Keys(want)))
	if err != nil {
		return err
	}
	pending := map[string]any{}
	for name, raw := range want {
		kind := mysqlv1beta1.OnlineSettings[name]
		value, canonical, err := mysqlv1beta1.SettingValue(kind, raw)
		if err != nil {
			continue // the webhook refuses it; my.cnf has it as written
		}
		if _, have, err := mysqlv1beta1.SettingValue(kind, live[name]); err == nil && have == canonical {
			continue
		}
		pending[name] = value
	}
	if len(pending) == 0 {
		return nil
	}
	m.mu.Lock()
	last, tried := m.settingsTries[clusterKey(cl.obj)+inst.Name]
	m.mu.Unlock()
	if tried && last.want == fmt.Sprint(pending) && m.now().Sub(last.at) < SettingsRetry {
		return nil
	}
	inst.Settings = pending
	return nil
}

// applySettings sets an instance's online settings that differ from the spec. A refusal is
// logged and told in a Warning Event, and does not fail the pass: the instance goes on with
// its values, and my.cnf gives it the spec's at its next start.
func (m *Manager) applySettings(ctx context.Context, cl *cluster, t mysql.Instance, name string, settings map[string]any) {
	m.mu.Lock()
	if m.settingsTries == nil {
		m.settingsTries = map[string]settingsTry{}
	}
	m.settingsTries[clusterKey(cl.obj)+name] = settingsTry{at: m.now(), want: fmt.Sprint(settings)}
	m.mu.Unlock()
	var failed []string
	for _, v := range slices.Sorted(maps.Keys(settings)) {
		if err := t.SetGlobal(ctx, v, settings[v]); err != nil {
			logf.FromContext(ctx).Error(err, "Online setting refused", "instance", name, "setting", v)
			failed = append(failed, fmt.Sprintf("%s: %v", v, err))
		}
	}
	if len(failed) > 0 && m.Recorder != nil {
		m.Recorder.Eventf(cl.obj, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonSettingRefused, string(ActApplySettings),
			"%s keeps its values until its next restart: %s", name, strings.Join(failed, "; "))
	}
}
