package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Colours of a terminal; nothing else is printed with escape codes.
const (
	colorReset  = "\x1b[0m"
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
)

// historyShown is how many of the operator's last actions the status table shows (JSON and
// YAML have all of status.history).
const historyShown = 5

// cell is a table cell: its text, and the colour it is printed in on a terminal.
type cell struct {
	text  string
	color string
}

// table prints rows in columns two spaces apart; widths count the text, not the colour.
type table struct {
	rows  [][]cell
	color bool
}

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			text := c.text
			if t.color && c.color != "" {
				text = c.color + text + colorReset
			}
			b.WriteString(text)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

func plain(s string) cell { return cell{text: s} }

// conditionColor: green when the condition says all is well, red when it says otherwise,
// yellow while unknown. Degraded and PendingRestart are good when False; Progressing is
// neither.
func conditionColor(c metav1.Condition) string {
	good := metav1.ConditionTrue
	switch c.Type {
	case mysqlv1beta1.ConditionProgressing:
		return ""
	case mysqlv1beta1.ConditionDegraded, mysqlv1beta1.ConditionPendingRestart:
		good = metav1.ConditionFalse
	}
	switch c.Status {
	case good:
		return colorGreen
	case metav1.ConditionUnknown:
		return colorYellow
	}
	return colorRed
}

func readyColor(ready string) string {
	return conditionColor(metav1.Condition{Type: mysqlv1beta1.ConditionReady, Status: metav1.ConditionStatus(ready)})
}

// ago is how long before now t was, as kubectl prints ages; "-" for no time.
func (o *options) ago(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(o.now().Sub(t.Time))
}

func when(t *metav1.Time, o *options) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + o.ago(t) + " ago)"
}

func encode(w io.Writer, v any, output string) error {
	var b []byte
	var err error
	if output == "yaml" {
		b, err = yaml.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	}
	if err != nil {
		return fmt.Errorf("while printing %s: %w", output, err)
	}
	_, err = w.Write(b)
	return err
}

// clusterList is what -o json|yaml prints of the list.
type clusterList struct {
	Clusters []*Report `json:"clusters"`
}

func (o *options) printList(reports []*Report, output string, all bool) error {
	if output != "" {
		return encode(o.io.Out, clusterList{Clusters: reports}, output)
	}
	if len(reports) == 0 {
		where := "namespace " + o.namespace
		if all {
			where = "any namespace"
		}
		fmt.Fprintf(o.io.ErrOut, "No MySQLClusters in %s.\n", where)
		return nil
	}
	t := &table{color: o.color}
	head := []cell{plain("NAME"), plain("READY"), plain("PHASE"), plain("INSTANCES"), plain("PRIMARY"),
		plain("VERSION"), plain("LAST BACKUP"), plain("AGE")}
	if all {
		head = append([]cell{plain("NAMESPACE")}, head...)
	}
	t.add(head...)
	for _, r := range reports {
		ready := r.Ready
		if ready == "" {
			ready = "-"
		}
		row := []cell{plain(r.Name), {text: ready, color: readyColor(r.Ready)}, plain(dash(r.Phase)),
			plain(fmt.Sprintf("%d/%d", r.ReadyInstances, r.Instances)), plain(dash(r.Primary)), plain(dash(r.Version)),
			plain(o.ago(r.Backup.LastSuccessful)), plain(o.ago(&r.Created))}
		if all {
			row = append([]cell{plain(r.Namespace)}, row...)
		}
		t.add(row...)
	}
	t.write(o.io.Out)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (o *options) printReport(r *Report, output string) error {
	if output != "" {
		return encode(o.io.Out, r, output)
	}
	w := o.io.Out
	head := &table{color: o.color}
	head.add(plain("Cluster:"), plain(r.Namespace+"/"+r.Name))
	head.add(plain("Phase:"), cell{text: dash(r.Phase) + " (Ready: " + dash(r.Ready) + ")", color: readyColor(r.Ready)})
	head.add(plain("MySQL:"), plain(dash(r.Version)))
	head.add(plain("Instances:"), plain(fmt.Sprintf("%d of %d ready", r.ReadyInstances, r.Instances)))
	head.add(plain("Primary:"), plain(dash(r.Primary)))
	if r.DesiredPrimary != "" && r.DesiredPrimary != r.Primary {
		head.add(plain("Switchover:"), cell{text: "to " + r.DesiredPrimary + " (spec.primary), not done yet", color: colorYellow})
	}
	if r.Paused {
		head.add(plain("Paused:"), cell{text: "yes: the operator changes nothing of this cluster", color: colorYellow})
	}
	head.add(plain("Endpoints:"), plain("primary "+dash(r.Endpoints.Primary)+", replicas "+dash(r.Endpoints.Replicas)))
	head.add(plain("Last backup:"), plain(when(r.Backup.LastSuccessful, o)))
	if r.Backup.LastFailure != nil {
		head.add(plain("Last failure:"), cell{text: when(r.Backup.LastFailure, o), color: colorRed})
	}
	if r.Backup.NextScheduled != nil {
		head.add(plain("Next backup:"), plain(r.Backup.NextScheduled.UTC().Format(time.RFC3339)))
	}
	if ro := r.Rollout; ro != nil {
		head.add(plain("Rollout:"), plain(fmt.Sprintf("%d of %d on %s: %s", ro.Updated, ro.Total, ro.Revision, ro.Step)))
	}
	head.write(w)

	fmt.Fprintln(w)
	members := &table{color: o.color}
	members.add(plain("INSTANCE"), plain("ROLE"), plain("READY"), plain("GTID EXECUTED"), plain("BEHIND"),
		plain("IO"), plain("SQL"), plain("SEMI-SYNC"), plain("NODE"), plain("RESTARTS"))
	var errs []string
	for _, m := range r.Members {
		members.add(memberRow(m)...)
		if m.SQLError != "" {
			errs = append(errs, m.Name+": "+m.SQLError)
		} else if m.SQL != nil && m.SQL.LastError != "" {
			errs = append(errs, m.Name+": replication error: "+m.SQL.LastError)
		}
	}
	members.write(w)
	for _, e := range errs {
		fmt.Fprintln(w, "  "+e)
	}

	fmt.Fprintln(w)
	conds := &table{color: o.color}
	conds.add(plain("CONDITION"), plain("STATUS"), plain("REASON"), plain("AGE"), plain("MESSAGE"))
	for _, c := range r.Conditions {
		conds.add(plain(c.Type), cell{text: string(c.Status), color: conditionColor(c)}, plain(c.Reason),
			plain(o.ago(&c.LastTransitionTime)), plain(c.Message))
	}
	conds.write(w)
	if len(r.History) > 0 {
		fmt.Fprintln(w)
		last := &table{color: o.color}
		last.add(plain("LAST ACTIONS"), plain("INSTANCE"), plain("FROM"), plain("REASON"), plain("AGE"))
		for _, e := range r.History[max(0, len(r.History)-historyShown):] {
			last.add(plain(e.Action), plain(e.Instance), plain(dash(e.From)), plain(e.Reason), plain(o.ago(&e.Time)))
		}
		last.write(w)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintln(w, "Note: "+n)
		}
	}
	return nil
}

func memberRow(m Member) []cell {
	ready := cell{text: strconv.FormatBool(m.Ready), color: colorGreen}
	if !m.Ready {
		ready = cell{text: "false (" + m.Phase + ")", color: colorRed}
	}
	role := dash(m.Role)
	if m.Fenced {
		role = "fenced"
	}
	row := []cell{plain(m.Name), plain(role), ready}
	s := m.SQL
	if s == nil {
		return append(row, plain("?"), plain("?"), plain("?"), plain("?"), plain("?"), plain(dash(m.Node)),
			plain(strconv.Itoa(int(m.Restarts))))
	}
	behind := plain("-")
	if m.Behind != nil {
		behind = plain(strconv.FormatInt(*m.Behind, 10))
		if *m.Behind > 0 {
			behind.color = colorYellow
		}
		if *m.Errant > 0 {
			behind = cell{text: fmt.Sprintf("%s (%d errant)", behind.text, *m.Errant), color: colorRed}
		}
	}
	return append(row, plain(dash(s.GTIDExecuted)), behind, thread(s.IOThread), thread(s.SQLThread),
		plain(semiSync(s)), plain(dash(m.Node)), plain(strconv.Itoa(int(m.Restarts))))
}

func thread(state string) cell {
	switch state {
	case "":
		return plain("-")
	case "ON":
		return cell{text: state, color: colorGreen}
	}
	return cell{text: state, color: colorRed}
}

func semiSync(s *InstanceSQL) string {
	switch {
	case s.SemiSyncSource:
		return fmt.Sprintf("source, %d replica(s)", s.SemiSyncClients)
	case s.SemiSyncReplica:
		return "replica"
	}
	return "off"
}
