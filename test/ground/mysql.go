package ground

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// InstanceHost is an instance's DNS name, as replicas and the operator use it.
func InstanceHost(namespace, cluster, pod string) string {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster}}
	return pod + "." + resources.HeadlessServiceName(c) + "." + namespace + ".svc"
}

// ServiceHost is the DNS name of one of a cluster's Services (e.g. <cluster>-primary).
func ServiceHost(namespace, service string) string { return service + "." + namespace + ".svc" }

// DB opens a connection with root's privileges (rootDB) to one instance of a cluster the
// way the operator reaches it: each dial goes to the pod's IP of the moment (no name
// lookup through the cluster's DNS), over TLS verified for the
// instance's DNS name against the cluster's CA.
func (g *Ground) DB(ctx context.Context, namespace, cluster, pod string) (*sql.DB, error) {
	return g.rootDB(ctx, namespace, cluster, podAddr(namespace, pod), InstanceHost(namespace, cluster, pod))
}

// HostDB opens a connection with root's privileges (rootDB) to host:3306 (a Service's DNS
// name, through the cluster's DNS and Service routing as an application's), verified with
// the cluster's CA; a lookup the cluster's DNS fails is retried for up to lookupBound.
// Dials, reads and writes time out after 5 s.
func (g *Ground) HostDB(ctx context.Context, namespace, cluster, host string) (*sql.DB, error) {
	return g.rootDB(ctx, namespace, cluster, host, host)
}

// rootDB connects as the tests' own account (TestUser), which has root's privileges
// without GRANT OPTION; root itself connects over the local socket only. The account is
// made the first time a cluster's instance refuses it.
func (g *Ground) rootDB(ctx context.Context, namespace, cluster, host, serverName string) (*sql.DB, error) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster}}
	cs, creds, err := g.secret(ctx, namespace, resources.CredentialsSecretName(c))
	if err != nil {
		return nil, err
	}
	db, err := g.tlsDB(ctx, cs, c, hostPort(host), serverName, TestUser, TestPassword, "")
	if err != nil {
		return nil, err
	}
	if _, done := testAccounts.Load(creds.UID); done {
		return db, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var me *mysql.MySQLError
	switch err := db.PingContext(pctx); {
	case err == nil:
		testAccounts.Store(creds.UID, true)
	case errors.As(err, &me) && me.Number == 1045: // no such account (yet)
		if err := g.ensureTestAccount(ctx, cs, c, creds); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return db, nil // any other failure is the caller's to retry, as with any connection
}

// AccountDB opens a connection to an instance as one of the operator's accounts (user),
// with the password under key in the cluster's credentials Secret.
func (g *Ground) AccountDB(ctx context.Context, namespace, cluster, pod, user, key string) (*sql.DB, error) {
	return g.accountDB(ctx, namespace, cluster, podAddr(namespace, pod), InstanceHost(namespace, cluster, pod), user, key)
}

// AccountDBWithPassword is AccountDB with a password of the caller's (one a rotation
// replaced, say) instead of the Secret's.
func (g *Ground) AccountDBWithPassword(ctx context.Context, namespace, cluster, pod, user, password string) (*sql.DB, error) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster}}
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	return g.tlsDB(ctx, cs, c, podAddr(namespace, pod), InstanceHost(namespace, cluster, pod), user, password, "")
}

func (g *Ground) accountDB(ctx context.Context, namespace, cluster, host, serverName, user, key string) (*sql.DB, error) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster}}
	cs, creds, err := g.secret(ctx, namespace, resources.CredentialsSecretName(c))
	if err != nil {
		return nil, err
	}
	return g.tlsDB(ctx, cs, c, hostPort(host), serverName, user, string(creds.Data[key]), "")
}

// secret reads one Secret, and returns the clientset it used for further reads.
func (g *Ground) secret(ctx context.Context, namespace, name string) (kubernetes.Interface, *corev1.Secret, error) {
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("while creating a client: %w", err)
	}
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while reading Secret %s/%s: %w", namespace, name, err)
	}
	return cs, s, nil
}

// ApplicationDB connects as an application would, with nothing but the Secret
// <cluster>-app (its host, port, username, password and database) and the cluster's CA.
func (g *Ground) ApplicationDB(ctx context.Context, namespace, cluster string) (*sql.DB, error) {
	return g.ApplicationDBWithPassword(ctx, namespace, cluster, "")
}

// ApplicationDBWithPassword is ApplicationDB with another password than the Secret's
// ("": the Secret's).
func (g *Ground) ApplicationDBWithPassword(ctx context.Context, namespace, cluster, password string) (*sql.DB, error) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster}}
	cs, app, err := g.secret(ctx, namespace, resources.ApplicationSecretName(c))
	if err != nil {
		return nil, err
	}
	d := func(k string) string { return string(app.Data[k]) }
	if password == "" {
		password = d(resources.KeyAppPassword)
	}
	return g.tlsDB(ctx, cs, c, net.JoinHostPort(d(resources.KeyAppHost), d(resources.KeyAppPort)), d(resources.KeyAppHost),
		d(resources.KeyAppUsername), password, d(resources.KeyAppDatabase))
}

// tlsDB connects to addr over TLS verified for serverName against the cluster's CA.
func (g *Ground) tlsDB(ctx context.Context, cs kubernetes.Interface, c *mysqlv1beta1.MySQLCluster, addr, serverName, user, password,
	database string) (*sql.DB, error) {
	tlsSecret, err := cs.CoreV1().Secrets(c.Namespace).Get(ctx, resources.TLSSecretName(c), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("while reading %s's TLS Secret: %w", c.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(tlsSecret.Data[resources.KeyCACert]) {
		return nil, fmt.Errorf("secret %s has no CA certificate", tlsSecret.Name)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = g.dialNet(), addr, user, password, database
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	cfg.TLS = &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("while connecting to %s: %w", addr, err)
	}
	return sql.OpenDB(conn), nil
}

// Exec runs a command in a container of a running pod (kubectl exec: API server, then the
// node's kubelet and containerd) and returns its output; err includes stderr.
func (g *Ground) Exec(ctx context.Context, pod *corev1.Pod, container string, command ...string) (string, error) {
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return "", fmt.Errorf("while creating a client: %w", err)
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(g.RESTConfig(), "POST", req.URL())
	if err != nil {
		return "", fmt.Errorf("exec in %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("exec %v in %s/%s: %w: %s", command, pod.Namespace, pod.Name, err, stderr.String())
	}
	return stdout.String(), nil
}

// Signal sends a signal to the process named process in a container, from the node, as a
// crash or a hang would hit it (SIGKILL, SIGSTOP, SIGCONT).
func (g *Ground) Signal(pod *corev1.Pod, container, process string, sig syscall.Signal) error {
	pid, err := g.ProcessPID(pod, container, process)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("while sending %s to %s in %s of %s/%s (pid %d): %w", sig, process, container, pod.Namespace, pod.Name, pid, err)
	}
	return nil
}
