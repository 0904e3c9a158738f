package resources

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A rotation of the operator's accounts' passwords (the cluster's annotation
// mysqlv1beta1.AnnotationRotateOperatorPasswords) takes the credentials Secret through
// three phases. The reconciler takes each step (CredentialsSecret) once the one before is
// done; the topology manager does the MySQL side and notes it in the primary Lease.
//
//  1. Retaining: NEXT_<key> holds each rotated account's new password (AnnotationRotatingFor
//     the ask). The topology manager makes each account accept its new password beside its
//     current one (MySQL's dual passwords) and notes AnnotationPasswordsRetained.
//  2. Rolling: <key> holds the new password, PREVIOUS_<key> the old one (AnnotationRotatedFor
//     and AnnotationRotatedAt say which ask, and when). The instances' and the archiver's
//     pod templates carry the ask (AnnotationCredentials), so each restarts onto the new
//     passwords (the roll: replicas first, the primary last after a switchover). Both
//     passwords are accepted meanwhile, so every consumer keeps working.
//  3. Discarding: once every pod of the cluster runs with the new passwords and no Job
//     started before the swap still runs, AnnotationDiscardFor is the ask. The topology
//     manager gives each replica's channel the new replication password, discards the old
//     passwords, and notes AnnotationPasswordsDiscarded; the PREVIOUS_ keys then go.
//
// Every write of the Secret carries the resourceVersion it was built from, so no step
// is taken on a stale copy. Root and ProbeUser (local socket only) are not rotated.

// Annotations of a rotation: the credentials Secret's (besides AnnotationRotatedFor and
// AnnotationRotatedAt, shared with the application Secret) and the primary Lease's notes.
const (
	AnnotationRotatingFor        = "mysql.dolphin-operator.io/rotating-for"
	AnnotationDiscardFor         = "mysql.dolphin-operator.io/discard-for"
	AnnotationPasswordsRetained  = "mysql.dolphin-operator.io/passwords-retained"
	AnnotationPasswordsDiscarded = "mysql.dolphin-operator.io/passwords-discarded"
	// AnnotationCredentials, on a pod template, is the last rotation the cluster's
	// credentials Secret answered: a new one restarts the pods onto the new passwords.
	AnnotationCredentials = "mysql.dolphin-operator.io/credentials"
)

// RotatedKeys are the passwords a rotation changes: the operator's network accounts.
var RotatedKeys = []string{KeyAdminPassword, KeyReplicationPassword, KeyExporterPassword, KeyBackupPassword, KeyUsersPassword}

// RotatedAccounts are RotatedKeys' accounts, in the same order.
var RotatedAccounts = []string{AdminUser, ReplicationUser, ExporterUser, BackupUser, UsersUser}

// NextKey names where a rotation keeps key's new password until it is current.
func NextKey(key string) string { return "NEXT_" + key }

// PreviousKey names where a rotation keeps key's old password until it is discarded.
func PreviousKey(key string) string { return "PREVIOUS_" + key }

// RotationPhase is where a rotation of the operator's passwords is ("" when none runs).
type RotationPhase string

// The phases, in order.
const (
	RotationRetaining  RotationPhase = "Retaining"
	RotationRolling    RotationPhase = "Rolling"
	RotationDiscarding RotationPhase = "Discarding"
)

// Rotation is the rotation a credentials Secret is in.
type Rotation struct {
	Phase RotationPhase
	// Ask is the value of the cluster's annotation the rotation answers.
	Ask string
}

// CredentialsRotation reads the phase from the Secret (nil: none).
func CredentialsRotation(s *corev1.Secret) Rotation {
	if s == nil {
		return Rotation{}
	}
	switch {
	case hasAny(s.Data, NextKey):
		return Rotation{Phase: RotationRetaining, Ask: s.Annotations[AnnotationRotatingFor]}
	case hasAny(s.Data, PreviousKey):
		ask := s.Annotations[AnnotationRotatedFor]
		if s.Annotations[AnnotationDiscardFor] == ask {
			return Rotation{Phase: RotationDiscarding, Ask: ask}
		}
		return Rotation{Phase: RotationRolling, Ask: ask}
	}
	return Rotation{}
}

func hasAny(data map[string][]byte, name func(string) string) bool {
	for _, k := range RotatedKeys {
		if len(data[name(k)]) > 0 {
			return true
		}
	}
	return false
}

// RotationProgress is what the reconciler knows of a rotation's steps besides the Secret.
type RotationProgress struct {
	// Retained and Discarded are the primary Lease's notes: the ask whose new passwords
	// every account accepts, and whose old ones are discarded.
	Retained, Discarded string
	// ConsumersUpdated: every pod of the cluster runs with the Secret's current passwords
	// and no Job started before they were set still runs.
	ConsumersUpdated bool
}

// rotate takes the next step of a rotation on data and annotations (the Secret to be),
// if the one before is done; ask is the cluster's annotation ("" if none). existing says
// whether the Secret exists: a Secret being made has new passwords anyway, and answers the
// ask at once.
func rotate(data map[string][]byte, annotations map[string]string, rot Rotation, ask string, p RotationProgress,
	existing bool, now time.Time, random func() ([]byte, error)) error {
	switch rot.Phase {
	case "":
		if ask == "" || ask == annotations[AnnotationRotatedFor] {
			return nil
		}
		if !existing {
			annotations[AnnotationRotatedFor] = ask
			return nil
		}
		for _, k := range RotatedKeys {
			pw, err := random()
			if err != nil {
				return err
			}
			data[NextKey(k)] = pw
		}
		annotations[AnnotationRotatingFor] = ask
	case RotationRetaining:
		if p.Retained != rot.Ask {
			return nil
		}
		for _, k := range RotatedKeys {
			data[PreviousKey(k)], data[k] = data[k], data[NextKey(k)]
			delete(data, NextKey(k))
		}
		annotations[AnnotationRotatedFor], annotations[AnnotationRotatedAt] = rot.Ask, now.UTC().Format(time.RFC3339)
		delete(annotations, AnnotationRotatingFor)
	case RotationRolling:
		if p.ConsumersUpdated {
			annotations[AnnotationDiscardFor] = rot.Ask
		}
	case RotationDiscarding:
		if p.Discarded != rot.Ask {
			return nil
		}
		for _, k := range RotatedKeys {
			delete(data, PreviousKey(k))
		}
		delete(annotations, AnnotationDiscardFor)
	}
	return nil
}

// CredentialsAnnotations are the credentials Secret's annotations a rotation writes.
var CredentialsAnnotations = []string{AnnotationRotatingFor, AnnotationRotatedFor, AnnotationRotatedAt, AnnotationDiscardFor}

// rotationAnnotations are the Secret's annotations a rotation keeps.
func rotationAnnotations(existing *corev1.Secret) map[string]string {
	out := map[string]string{}
	if existing == nil {
		return out
	}
	for _, k := range CredentialsAnnotations {
		if v, ok := existing.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// rotationData are the Secret's passwords a rotation keeps beside CredentialKeys.
func rotationData(existing *corev1.Secret) map[string][]byte {
	out := map[string][]byte{}
	if existing == nil {
		return out
	}
	for _, k := range RotatedKeys {
		for _, name := range []string{NextKey(k), PreviousKey(k)} {
			if v := existing.Data[name]; len(v) > 0 {
				out[name] = v
			}
		}
	}
	return out
}
