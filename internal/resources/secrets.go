package resources

import (
	"crypto/rand"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Keys of the credentials Secret: one password per MySQL account the operator manages.
const (
	KeyRootPassword        = "ROOT_PASSWORD"
	KeyAdminPassword       = "ADMIN_PASSWORD"
	KeyReplicationPassword = "REPLICATION_PASSWORD"
	KeyExporterPassword    = "EXPORTER_PASSWORD"
	KeyBackupPassword      = "BACKUP_PASSWORD"
	KeyUsersPassword       = "USERS_PASSWORD"
	KeyProbePassword       = "PROBE_PASSWORD"
)

// credentials pairs each password the credentials Secret holds with its account: root
// and the operator's.
var credentials = []struct{ key, account string }{{KeyRootPassword, "root"}, {KeyAdminPassword, AdminUser},
	{KeyReplicationPassword, ReplicationUser}, {KeyExporterPassword, ExporterUser}, {KeyBackupPassword, BackupUser},
	{KeyUsersPassword, UsersUser}, {KeyProbePassword, ProbeUser}}

// CredentialKeys lists every password the credentials Secret holds.
var CredentialKeys = credentialColumn(func(key, _ string) string { return key })

// CredentialAccounts are the accounts those passwords are for, in the same order.
var CredentialAccounts = credentialColumn(func(_, account string) string { return account })

func credentialColumn(pick func(key, account string) string) []string {
	out := make([]string, 0, len(credentials))
	for _, c := range credentials {
		out = append(out, pick(c.key, c.account))
	}
	return out
}

// passwordAlphabet avoids characters that need quoting in a shell, a DSN or SQL.
const passwordAlphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// PasswordLength gives ~190 bits of entropy with passwordAlphabet.
const PasswordLength = 32

// CredentialsSecret builds the Secret of the cluster's passwords. Every password already
// in existing is kept as it is (passwords are generated once and never changed by
// accident); only missing ones are generated from random. existing may be nil. A rotation
// of the operator's accounts asked for on the cluster is taken one step further when p
// says the step before is done (rotation.go).
func CredentialsSecret(c *mysqlv1beta1.MySQLCluster, existing *corev1.Secret, random io.Reader, p RotationProgress,
	now time.Time) (*corev1.Secret, error) {
	if random == nil {
		random = rand.Reader
	}
	data := rotationData(existing)
	for _, k := range CredentialKeys {
		if existing != nil && len(existing.Data[k]) > 0 {
			data[k] = existing.Data[k]
			continue
		}
		p, err := password(random)
		if err != nil {
			return nil, err
		}
		data[k] = p
	}
	annotations := rotationAnnotations(existing)
	if err := rotate(data, annotations, CredentialsRotation(existing), c.Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords],
		p, existing != nil, now, func() ([]byte, error) { return password(random) }); err != nil {
		return nil, err
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecretName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase),
			Annotations: annotations},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, nil
}

// password draws PasswordLength characters uniformly from passwordAlphabet.
func password(random io.Reader) ([]byte, error) {
	out := make([]byte, 0, PasswordLength)
	buf := make([]byte, 64)
	// Rejection sampling keeps every character equally likely.
	limit := byte(256 - 256%len(passwordAlphabet))
	for len(out) < PasswordLength {
		if _, err := io.ReadFull(random, buf); err != nil {
			return nil, err
		}
		for _, b := range buf {
			if b < limit && len(out) < PasswordLength {
				out = append(out, passwordAlphabet[int(b)%len(passwordAlphabet)])
			}
		}
	}
	return out, nil
}

// Keys of the application Secret (ApplicationSecret).
const (
	KeyAppUsername         = "username"
	KeyAppPassword         = "password"
	KeyAppPreviousPassword = "previous-password"
	KeyAppDatabase         = "database"
	KeyAppHost             = "host"
	KeyAppReadOnlyHost     = "readonly-host"
	KeyAppPort             = "port"
	KeyAppURI              = "uri"
	KeyAppJDBCURI          = "jdbc-uri"
)

// Annotations of the application Secret that record its last rotation: the value of the
// cluster's rotation annotation it answered, and when.
const (
	AnnotationRotatedFor = "mysql.dolphin-operator.io/rotated-for"
	AnnotationRotatedAt  = "mysql.dolphin-operator.io/rotated-at"
)

// PasswordsSetAt says when the passwords of a Secret built as desired were set: at its
// last rotation (AnnotationRotatedAt), else when existing was made, else now (it is being
// made). A password added to an existing Secret later (a key a newer release needs) has no
// time of its own and counts from the Secret's creation.
func PasswordsSetAt(desired, existing *corev1.Secret, now time.Time) time.Time {
	if desired != nil {
		if at, err := time.Parse(time.RFC3339, desired.Annotations[AnnotationRotatedAt]); err == nil {
			return at
		}
	}
	if existing != nil && !existing.CreationTimestamp.IsZero() {
		return existing.CreationTimestamp.Time
	}
	return now
}

// ApplicationSecretName names the Secret of spec.application's account.
func ApplicationSecretName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-app" }

// ApplicationSecret is the Secret an application mounts to connect as spec.application's
// account: the password and how to reach the primary and the replicas, also as a URI and
// a JDBC URL. Nil without spec.application. Passwords come from passwordAlphabet, which
// needs no escaping in a URI.
//
// The password is generated once and kept from existing, but when the cluster's rotation
// annotation holds a value the Secret has not answered yet: then a new one is generated
// and the one it replaces is kept as previous-password until the retention after now has
// passed (discardAt says when; zero when there is none to discard).
func ApplicationSecret(c *mysqlv1beta1.MySQLCluster, existing *corev1.Secret, random io.Reader, now time.Time) (
	s *corev1.Secret, discardAt time.Time, err error) {
	a := c.Spec.Application
	if a == nil {
		return nil, time.Time{}, nil
	}
	if random == nil {
		random = rand.Reader
	}
	var pw, previous []byte
	annotations := map[string]string{}
	if existing != nil {
		pw, previous = existing.Data[KeyAppPassword], existing.Data[KeyAppPreviousPassword]
		for _, k := range []string{AnnotationRotatedFor, AnnotationRotatedAt} {
			if v, ok := existing.Annotations[k]; ok {
				annotations[k] = v
			}
		}
	}
	if ask := c.Annotations[mysqlv1beta1.AnnotationRotateApplicationPassword]; ask != "" && ask != annotations[AnnotationRotatedFor] && len(pw) > 0 {
		previous, pw = pw, nil
		annotations[AnnotationRotatedFor], annotations[AnnotationRotatedAt] = ask, now.UTC().Format(time.RFC3339)
	}
	if len(pw) == 0 {
		if pw, err = password(random); err != nil {
			return nil, time.Time{}, err
		}
	}
	if len(previous) > 0 {
		retention := mysqlv1beta1.DefaultPreviousPasswordRetention
		if a.PreviousPasswordRetention != nil {
			retention = a.PreviousPasswordRetention.Duration
		}
		at, perr := time.Parse(time.RFC3339, annotations[AnnotationRotatedAt])
		if discardAt = at.Add(retention); perr != nil || !now.Before(discardAt) {
			previous, discardAt = nil, time.Time{}
		}
	}
	host := PrimaryServiceName(c) + "." + c.Namespace + ".svc"
	port := strconv.Itoa(MySQLPort)
	user := a.ApplicationUser()
	data := map[string][]byte{
		KeyAppUsername:     []byte(user),
		KeyAppPassword:     pw,
		KeyAppDatabase:     []byte(a.Database),
		KeyAppHost:         []byte(host),
		KeyAppReadOnlyHost: []byte(ReplicasServiceName(c) + "." + c.Namespace + ".svc"),
		KeyAppPort:         []byte(port),
		KeyAppURI:          []byte("mysql://" + user + ":" + string(pw) + "@" + host + ":" + port + "/" + a.Database),
		KeyAppJDBCURI:      []byte("jdbc:mysql://" + host + ":" + port + "/" + a.Database),
	}
	if len(previous) > 0 {
		data[KeyAppPreviousPassword] = previous
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: ApplicationSecretName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase),
			Annotations: annotations},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, discardAt, nil
}
