package resources

import (
	"cmp"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// mysqlUID is the mysql user of the official MySQL image.
const mysqlUID = int64(999)

// StatefulSetInput is what the StatefulSet needs besides the cluster.
type StatefulSetInput struct {
	Images     Images
	ConfigHash string
	// ClaimTemplates of the existing StatefulSet, if any: they are immutable, so they are
	// kept (volume growth is done on the claims themselves).
	ClaimTemplates []corev1.PersistentVolumeClaim
	// Replicas overrides spec.instances when not nil: a scale-down is held until the
	// primary runs on an instance it keeps.
	Replicas *int32
	// Credentials is the last rotation of the operator's passwords the credentials Secret
	// answered ("" before the first): the pods carry it (AnnotationCredentials), and a
	// new one counts as a change of the pod inputs, so the instances restart onto the new
	// passwords whatever spec.updatePolicy.operatorUpgrade says.
	Credentials string
}

// podInputs is AnnotationPodInputs' value: PodInputsHash, with the credentials' rotation
// when there has been one (clusters without one keep the value earlier releases wrote).
func podInputs(c *mysqlv1beta1.MySQLCluster, in StatefulSetInput) string {
	if in.Credentials == "" {
		return PodInputsHash(c)
	}
	return shortHash([]string{PodInputsHash(c), in.Credentials})
}

// StatefulSet runs the cluster's instances: pods <cluster>-0..N-1, each with its volume.
func StatefulSet(c *mysqlv1beta1.MySQLCluster, in StatefulSetInput) *appsv1.StatefulSet {
	claimPolicy := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if c.Spec.DeletionPolicy == mysqlv1beta1.DeletionPolicyDelete {
		claimPolicy = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	// Retained, the volume of a replica scaled away is reused by a scale-up back.
	whenScaled := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if c.Spec.Storage.WhenScaled == mysqlv1beta1.DeletionPolicyDelete {
		whenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	claims := make([]corev1.PersistentVolumeClaim, len(in.ClaimTemplates))
	for i, t := range in.ClaimTemplates {
		// The API server fills in a template's status (phase Pending); it is not ours to
		// apply, and kept it would change the applied hash: a second write for nothing.
		claims[i] = *t.DeepCopy()
		claims[i].Status = corev1.PersistentVolumeClaimStatus{}
	}
	if len(claims) == 0 {
		claims = []corev1.PersistentVolumeClaim{dataClaimTemplate(c)}
	}
	// The template sees PodInputs only (its comment says why).
	template := podTemplate(PodInputs(c), in)
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase),
			Annotations: map[string]string{AnnotationPodInputs: podInputs(c, in), AnnotationPodTemplate: TemplateHash(&template)}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(*cmp.Or(in.Replicas, c.Spec.Instances)),
			ServiceName: HeadlessServiceName(c),
			Selector:    &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			// Instances start independently; which one is primary is the topology manager's call.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// The reconciler's roll deletes each outdated pod in its turn: replicas first,
			// the primary last and only after a switchover (controllers/mysqlcluster_roll.go).
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: claimPolicy,
				WhenScaled:  whenScaled,
			},
			Template:             template,
			VolumeClaimTemplates: claims,
		},
	}
}

func dataClaimTemplate(c *mysqlv1beta1.MySQLCluster) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: SelectorLabels(c)},
		Spec:       claimSpec(*c.Spec.Storage.Size, c.Spec.Storage.StorageClassName),
	}
}

// claimSpec is a single-node, filesystem volume of the given size. The volume mode is
// set because the API server would default it (see the package comment).
func claimSpec(size resource.Quantity, class *string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: class,
		VolumeMode:       new(corev1.PersistentVolumeFilesystem),
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
	}
}

func podTemplate(c *mysqlv1beta1.MySQLCluster, in StatefulSetInput) corev1.PodTemplateSpec {
	pt := c.Spec.PodTemplate
	annotations := merge(pt.Metadata.Annotations, map[string]string{AnnotationConfigHash: in.ConfigHash,
		"kubectl.kubernetes.io/default-container": ContainerMySQL})
	if in.Credentials != "" {
		annotations[AnnotationCredentials] = in.Credentials
	}
	containers := []corev1.Container{mysqldContainer(c, in.Images)}
	initContainers := []corev1.Container{initContainer(c, in.Images)}
	if c.Spec.Monitoring.Exporter.Enabled {
		containers = append(containers, exporterContainer(c, in.Images))
	}
	spec := corev1.PodSpec{
		InitContainers:                initContainers,
		Containers:                    containers,
		Volumes:                       volumes(c),
		TerminationGracePeriodSeconds: new(int64(60)), // a clean InnoDB shutdown takes time
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: new(true), RunAsUser: new(mysqlUID), RunAsGroup: new(mysqlUID), FSGroup: new(mysqlUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Affinity:                  pt.Affinity,
		Tolerations:               pt.Tolerations,
		NodeSelector:              pt.NodeSelector,
		PriorityClassName:         pt.PriorityClassName,
		TopologySpreadConstraints: pt.TopologySpreadConstraints,
		EnableServiceLinks:        new(false),
		DNSConfig:                 &corev1.PodDNSConfig{Options: dnsOptions},
	}
	if spec.Affinity == nil {
		spec.Affinity = defaultAffinity(c)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
		}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: merge(pt.Metadata.Labels, Labels(c, ComponentDatabase)), Annotations: annotations},
		Spec:       spec,
	}
}

// dnsOptions bound how long mysqld waits on one name lookup (the C library's default is 5
// s a try; a replica was seen failing one after 20 s). A replica's receiver looks its source's name up on every
// connection attempt; after a node that ran a cluster DNS replica is lost, a lookup sent
// to that replica is never answered until Kubernetes marks the node NotReady, and a
// replica that waits 20 s on it holds up a new primary's semi-synchronous commits. Each
// attempt (SOURCE_CONNECT_RETRY is 1 s) asks again, so short tries cost little.
var dnsOptions = []corev1.PodDNSConfigOption{{Name: "timeout", Value: new("1")}, {Name: "attempts", Value: new("2")}}

// defaultAffinity prefers one instance per node: losing a node then loses one instance.
func defaultAffinity(c *mysqlv1beta1.MySQLCluster) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			},
		}},
	}}
}

func tlsEnabled(c *mysqlv1beta1.MySQLCluster) bool {
	return c.Spec.TLS.Enabled == nil || *c.Spec.TLS.Enabled
}

func volumes(c *mysqlv1beta1.MySQLCluster) []corev1.Volume {
	v := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(c)}}}},
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if tlsEnabled(c) {
		v = append(v, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: TLSSecretName(c), DefaultMode: new(int32(0o440))}}})
	}
	return v
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: path}}}
}

// sqlProbe runs a statement over the local socket as the probe's account (ProbeUser, no
// privilege): it succeeds only when mysqld accepts connections and answers.
func sqlProbe(stmt string) corev1.ProbeHandler {
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c",
		fmt.Sprintf(`MYSQL_PWD="$%s" exec mysql --no-defaults --protocol=socket --socket=%s -u%s -N -e %q`,
			ProbePasswordVar, SocketPath, ProbeUser, stmt)}}}
}

func mysqldContainer(c *mysqlv1beta1.MySQLCluster, img Images) corev1.Container {
	mounts := []corev1.VolumeMount{
		{Name: "data", MountPath: DataDir},
		{Name: "config", MountPath: ConfigDir, ReadOnly: true},
		{Name: "run", MountPath: RunDir},
		{Name: "tmp", MountPath: TmpDir},
	}
	if tlsEnabled(c) {
		mounts = append(mounts, corev1.VolumeMount{Name: "tls", MountPath: TLSDir, ReadOnly: true})
	}
	ping := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c",
		"exec mysqladmin --no-defaults --protocol=socket --socket=" + SocketPath + " ping"}}}
	return corev1.Container{
		Name:  ContainerMySQL,
		Image: img.MySQLImage(c),
		// mysqld under a shell that fences it before it shuts down (mysqldScript says why).
		Command: []string{"sh", "-c", mysqldScript, "mysqld"},
		// Only our my.cnf is read. server_id comes from the pod's ordinal (the pod-index
		// label): unique per instance, stable across restarts. report_host is the
		// instance's DNS name, as SHOW REPLICAS shows it.
		Args: []string{"--defaults-file=" + ConfigDir + "/" + ConfigFileKey, "--server-id=100$(POD_INDEX)",
			"--report-host=$(POD_NAME)." + HeadlessServiceName(c) + "." + c.Namespace + ".svc"},
		Env: []corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_INDEX", "metadata.labels['apps.kubernetes.io/pod-index']"),
			secretEnv("MYSQL_ROOT_PASSWORD", CredentialsSecretName(c), KeyRootPassword),
			secretEnv(ProbePasswordVar, CredentialsSecretName(c), KeyProbePassword),
		},
		Ports:        []corev1.ContainerPort{{Name: "mysql", ContainerPort: MySQLPort, Protocol: corev1.ProtocolTCP}},
		Resources:    c.Spec.Resources,
		VolumeMounts: mounts,
		// Startup may include crash recovery of a large InnoDB: allow 30 minutes. A
		// restarted mysqld is out of every Service until the startup probe and then the
		// readiness probe have passed, each on its own period: with 5 s periods a primary
		// restarted by its kubelet took writes again about 5 s after the crash (bench-failover's
		// crash case), so startup is probed every second and readiness every two.
		StartupProbe:  &corev1.Probe{ProbeHandler: ping, PeriodSeconds: 1, TimeoutSeconds: 5, FailureThreshold: 1800},
		LivenessProbe: &corev1.Probe{ProbeHandler: ping, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3},
		// Ready once it answers queries and says whether it is writable: its role is known.
		ReadinessProbe: &corev1.Probe{ProbeHandler: sqlProbe("SELECT @@super_read_only"),
			PeriodSeconds: 2, TimeoutSeconds: 5, FailureThreshold: 3},
		SecurityContext: restrictedContainer(),
	}
}

// initScript initialises an empty data volume: mysqld --initialize with an init file that
// sets the root password (root connects over the local socket only), and creates the
// operator's accounts (AccountsSQL, and ApplicationGrantSQL with spec.application). Accounts made here are not in the binary log, so a new instance's
// gtid_executed is empty. A volume that has data is left alone. Passwords come from
// CredentialsSecret's alphabet, which needs no quoting in SQL.
//
// An initialisation can be cut short (the pod deleted, its node lost, the container out of
// memory); mysqld --initialize then leaves files that a second run refuses to initialise
// over, or a mysql/ folder without the accounts. So it runs in a stage folder on the volume,
// marked complete once mysqld has finished, and the stage is moved into place entry by
// entry with mysql/ last: DataDir/mysql, the sign of an initialised folder (as it was
// before the stage existed, so volumes initialised then are recognised), appears only
// once everything else is there. An unfinished stage is started over; a complete one is
// moved on. Files of any other origin on the volume are left alone and the container fails.
//
// A data folder initialised without the operator's accounts (by Dolphin 0.1.0, which did
// not manage replication) gets them once: mysqld runs on it without networking or binary
// log, with AccountsSQL (all IF NOT EXISTS) and SHUTDOWN as its init file, within the
// 30 minutes the startup probe allows mysqld, and the marker accountsMarker records it.
// Folders initialised here carry the marker from the start.
const initScript = `set -eu
` + applicationGrantFunc + `data=` + DataDir + `
stage=$data/` + initStage + `
if [ -d "$data/mysql" ]; then
  rm -rf "$stage"
  if [ -e "$data/` + accountsMarker + `" ]; then echo "data folder already initialised"; exit 0; fi
  echo "dolphin: adding the operator's accounts to a data folder initialised without them"
  cat > ` + TmpDir + `/accounts.sql <<SQL
SET SESSION sql_log_bin = 0;
` + AccountsSQL + `SQL
  application_grant >> ` + TmpDir + `/accounts.sql
  echo "SHUTDOWN;" >> ` + TmpDir + `/accounts.sql
  timeout 1800 mysqld --no-defaults --datadir="$data" --skip-networking --skip-log-bin --mysqlx=OFF \
    --socket=` + TmpDir + `/accounts.sock --pid-file=` + TmpDir + `/accounts.pid \
    --init-file=` + TmpDir + `/accounts.sql --log-error-verbosity=2
  touch "$data/` + accountsMarker + `"
  echo "dolphin: accounts added"
  exit 0
fi
if [ ! -e "$stage/.complete" ]; then
  other=$(find "$data" -mindepth 1 -maxdepth 1 ! -name lost+found ! -name ` + initStage + ` | head -n 5)
  if [ -n "$other" ]; then
    echo "dolphin: the data volume holds files but no initialised data folder; not initialising over:" $other >&2
    exit 1
  fi
  rm -rf "$stage"
  mkdir "$stage"
  cat > ` + TmpDir + `/init.sql <<SQL
ALTER USER 'root'@'localhost' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
` + AccountsSQL + `SQL
  application_grant >> ` + TmpDir + `/init.sql
  mysqld --no-defaults --initialize-insecure --datadir="$stage" --init-file=` + TmpDir + `/init.sql --log-error-verbosity=2
  touch "$stage/` + accountsMarker + `" "$stage/.complete"
else
  echo "dolphin: moving a complete initialisation into place"
fi
find "$stage" -mindepth 1 -maxdepth 1 ! -name mysql ! -name .complete -exec mv -t "$data" {} +
mv "$stage/mysql" "$data/mysql"
rm -rf "$stage"
echo "dolphin: data folder initialised"
`

// applicationGrantFunc is the init script's application_grant: ApplicationGrantSQL for the
// database ApplicationDatabaseVar names, nothing without one. Its backquotes are escaped
// for the shell (unescaped, a here-document would run the database's name as a command);
// a unit test runs it against ApplicationGrantSQL.
const applicationGrantFunc = `application_grant() {
  if [ -n "${` + ApplicationDatabaseVar + `:-}" ]; then
    printf '%s\n' "GRANT ALL PRIVILEGES ON \` + "`" + `${` + ApplicationDatabaseVar + `}\` + "`" + `.* TO '` + UsersUser + `'@'%' WITH GRANT OPTION;"
  fi
}
`

// initStage is the folder on the data volume an initialisation runs in (initScript).
const initStage = ".dolphin-init"

// accountsMarker, in the data folder, says it has the operator's accounts (initScript).
const accountsMarker = ".dolphin-accounts"

func initContainer(c *mysqlv1beta1.MySQLCluster, img Images) corev1.Container {
	return corev1.Container{
		Name:    "init",
		Image:   img.MySQLImage(c),
		Command: []string{"sh", "-c", initScript},
		Env: append([]corev1.EnvVar{secretEnv("MYSQL_ROOT_PASSWORD", CredentialsSecretName(c), KeyRootPassword)},
			accountEnv(c)...),
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: DataDir}, {Name: "run", MountPath: RunDir},
			{Name: "tmp", MountPath: TmpDir}},
		Resources:       c.Spec.Resources,
		SecurityContext: restrictedContainer(),
	}
}

// exporterContainer runs mysqld_exporter against its own instance, over TLS when the
// cluster has it (ExporterCnf), as the exporter account.
func exporterContainer(c *mysqlv1beta1.MySQLCluster, img Images) corev1.Container {
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: ConfigDir, ReadOnly: true}}
	if tlsEnabled(c) {
		mounts = append(mounts, corev1.VolumeMount{Name: "tls", MountPath: TLSDir, ReadOnly: true})
	}
	return corev1.Container{
		Name:  ContainerExporter,
		Image: img.ExporterImage(c),
		Args: []string{"--config.my-cnf=" + ConfigDir + "/" + ExporterConfigKey,
			"--mysqld.address=$(POD_NAME)." + HeadlessServiceName(c) + "." + c.Namespace + ".svc:" + strconv.Itoa(MySQLPort),
			"--web.listen-address=:" + strconv.Itoa(ExporterPort)},
		Env: []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"),
			secretEnv("MYSQLD_EXPORTER_PASSWORD", CredentialsSecretName(c), KeyExporterPassword)},
		Ports:        []corev1.ContainerPort{{Name: "metrics", ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: mounts,
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/", Port: intstr.FromString("metrics"), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 10},
		Resources:       c.Spec.Monitoring.Exporter.Resources,
		SecurityContext: restrictedContainer(),
	}
}

// restrictedContainer meets the "restricted" Pod Security Standard. The root file
// system is read-only; mysqld writes only to its volume, /var/run/mysqld and /tmp.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		RunAsNonRoot:             new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
