package e2e_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/pki"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// renewalBound is how long the instances may take to serve a renewed certificate: the
// kubelet writes a changed Secret into the pods' volumes within its sync period (10 s on
// the local cluster, a minute by default) plus its cache's lifetime, and the operator
// reloads within a topology pass after that.
const renewalBound = 3 * time.Minute

// TestCertificatesAreRenewedWithoutARestart forces a renewal of a 2-instance cluster's
// server certificate (its Secret deleted: the operator issues a new one), then of its CA
// (the CA Secret deleted). Each time every instance serves the new certificate within
// renewalBound with no container restarted, and the replica keeps replicating,
// verifying its source's certificate and name; across the CA change ca.crt trusts both
// CAs, so neither the operator nor the replica is locked out while the instances still
// serve the old CA's certificate.
func TestCertificatesAreRenewedWithoutARestart(t *testing.T) {
	ground.Level(t, ground.Full)
	ns := namespace(t)
	c, primary := readyPair(t, ns, "certs")
	replica := "certs-1"
	names := []string{primary, replica}
	before := podIdentities(t, ns, names...)
	uptime := uptimes(t, ns, names...)
	tlsName, caName := resources.TLSSecretName(c), resources.CASecretName(c)

	old := secretCert(t, ns, tlsName, corev1.TLSCertKey)
	require.NoError(t, served(ns, old, names...))
	renewed := forceRenewal(t, ns, tlsName, corev1.TLSCertKey, old)
	oldCA := secretCert(t, ns, caName, resources.KeyCACert)
	require.NoError(t, renewed.CheckSignatureFrom(oldCA), "a renewed server certificate keeps the CA")
	took := waitFor(t, renewalBound, "every instance to serve the renewed certificate", func() error {
		return served(ns, renewed, names...)
	})
	t.Logf("renewed server certificate served by every instance %s after it was issued", took.Round(10*time.Millisecond))
	requireReplicates(t, ns, primary, replica, "after_renewal")

	newCA := forceRenewal(t, ns, caName, resources.KeyCACert, oldCA)
	var leaf *x509.Certificate
	waitFor(t, time.Minute, "a server certificate of the new CA", func() error {
		leaf = secretCert(t, ns, tlsName, corev1.TLSCertKey)
		return leaf.CheckSignatureFrom(newCA)
	})
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(secretData(t, ns, tlsName)[resources.KeyCACert]))
	for _, cert := range []*x509.Certificate{renewed, leaf} {
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool})
		require.NoError(t, err, "during the CA's transition ca.crt trusts the old CA and the new")
	}
	took = waitFor(t, renewalBound, "every instance to serve the new CA's certificate", func() error {
		return served(ns, leaf, names...)
	})
	t.Logf("new CA's certificate served by every instance %s after it was issued", took.Round(10*time.Millisecond))
	// The replica's receiver connects again, checking its source with the new ca.crt.
	rd := dbOf(t, ns, replica)
	for _, q := range []string{"STOP REPLICA IO_THREAD", "START REPLICA IO_THREAD"} {
		_, err := rd.Exec(q)
		require.NoError(t, err, q)
	}
	requireReplicates(t, ns, primary, replica, "after_ca_change")

	readyCluster(t, ns, c.Name)
	requireTopology(t, ns, primary, names...)
	require.Equal(t, before, podIdentities(t, ns, names...), "no pod was replaced and no container restarted")
	for name, up := range uptimes(t, ns, names...) {
		require.Greater(t, up, uptime[name], "%s's mysqld kept running", name)
	}
}

// forceRenewal deletes a Secret and waits for the operator to issue it again with another
// certificate under key, which it returns.
func forceRenewal(t *testing.T, ns, name, key string, was *x509.Certificate) *x509.Certificate {
	t.Helper()
	require.NoError(t, k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	var cert *x509.Certificate
	took := waitFor(t, time.Minute, "the operator to issue "+name+" again", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		got, err := pki.ParseCertificate(s.Data[key])
		if err != nil {
			return err
		}
		if got.Equal(was) {
			return fmt.Errorf("still the old certificate")
		}
		cert = got
		return nil
	})
	t.Logf("%s issued again %s after it was deleted", name, took.Round(10*time.Millisecond))
	return cert
}

func secretData(t *testing.T, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s))
	return s.Data
}

func secretCert(t *testing.T, ns, name, key string) *x509.Certificate {
	t.Helper()
	cert, err := pki.ParseCertificate(secretData(t, ns, name)[key])
	require.NoError(t, err, "%s %s", name, key)
	return cert
}

// served checks that every instance's mysqld has loaded cert (the expiry it reports is
// cert's: certificates issued at different seconds differ in it).
func served(ns string, cert *x509.Certificate, names ...string) error {
	for _, n := range names {
		d, err := g.DB(context.Background(), ns, clusterOf(n), n)
		if err != nil {
			return err
		}
		var v string
		err = d.QueryRow("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Ssl_server_not_after'").Scan(&v)
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		got, err := time.Parse(mysql.SSLTimeLayout, v)
		if err != nil {
			return fmt.Errorf("%s: Ssl_server_not_after %q: %w", n, v, err)
		}
		if !got.Equal(cert.NotAfter) {
			return fmt.Errorf("%s serves a certificate expiring %s, not %s", n, got, cert.NotAfter)
		}
	}
	return nil
}

// requireReplicates writes a database on the primary and waits for the replica to have it.
func requireReplicates(t *testing.T, ns, primary, replica, database string) {
	t.Helper()
	_, err := dbOf(t, ns, primary).Exec("CREATE DATABASE " + database)
	require.NoError(t, err)
	rd := dbOf(t, ns, replica)
	waitFor(t, time.Minute, replica+" to replicate "+database, func() error {
		var n int
		if err := rd.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", database).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
}

// podIdentities is each pod's UID and its containers' restart counts.
func podIdentities(t *testing.T, ns string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, pod))
		id := string(pod.UID)
		for _, st := range pod.Status.ContainerStatuses {
			id += fmt.Sprintf(" %s:%d", st.Name, st.RestartCount)
		}
		out[n] = id
	}
	return out
}

// uptimes is each instance's mysqld uptime in seconds.
func uptimes(t *testing.T, ns string, names ...string) map[string]int {
	t.Helper()
	up, err := g.Uptimes(context.Background(), ns, clusterOf(names[0]), names...)
	require.NoError(t, err)
	return up
}
