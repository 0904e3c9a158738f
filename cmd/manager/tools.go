package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// The manager's pod-side commands: the operator's own binary, copied into a backup or
// restore Job's pod by its init container ("install"), runs the backup ("backup") or the
// restore ("restore") there, beside the MySQL image's mysqld, mysqldump and mysql.
const (
	cmdInstall = "install"
	cmdBackup  = "backup"
	cmdRestore = "restore"
)

// runTool runs the pod-side command args names, if it names one.
func runTool(args []string) (bool, int) {
	if len(args) == 0 {
		return false, 0
	}
	switch args[0] {
	case cmdInstall:
		if err := install(args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "manager install:", err)
			return true, 1
		}
		return true, 0
	case cmdBackup:
		return true, runBackup(args[1:])
	case cmdRestore:
		return true, runRestore(args[1:])
	case cmdArchive:
		return true, runArchive(args[1:])
	}
	return false, 0
}

// install copies this executable into a folder (an emptyDir the next container mounts).
func install(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: manager install DIR")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(args[0], "manager"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// storeFlags say where backups are; the S3 credentials come from the environment.
type storeFlags struct {
	s3Endpoint, s3Region, s3Bucket string
	s3CAFile, dir, claim           string
	s3PathStyle                    bool
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "the S3 endpoint URL")
	fs.StringVar(&f.s3Region, "s3-region", "", "the bucket's region")
	fs.StringVar(&f.s3Bucket, "s3-bucket", "", "the bucket (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
	fs.BoolVar(&f.s3PathStyle, "s3-path-style", false, "path-style bucket addressing")
	fs.StringVar(&f.s3CAFile, "s3-ca-file", "", "PEM certificates for the endpoint")
	fs.StringVar(&f.dir, "dir", "", "a mounted volume's folder instead of S3")
	fs.StringVar(&f.claim, "claim", "", "that volume's claim, for the location")
}

func (f storeFlags) check() error {
	if (f.s3Bucket == "") == (f.dir == "") {
		return errors.New("exactly one of --s3-bucket and --dir is required")
	}
	return nil
}

// backupFlags are the backup command's settings; secrets come from the environment.
type backupFlags struct {
	storeFlags
	cluster, name, key, method string
	instance, host, user       string
	port                       int
	mysqldump, mysqld, work    string
	tmp, report                string
	timeout                    time.Duration
}

func parseBackupFlags(args []string) (backupFlags, error) {
	var f backupFlags
	fs := flag.NewFlagSet("manager backup", flag.ContinueOnError)
	fs.StringVar(&f.cluster, "cluster", "", "the MySQLCluster backed up")
	fs.StringVar(&f.name, "name", "", "the MySQLBackup")
	fs.StringVar(&f.key, "key", "", "the data object's key (the manifest goes beside it)")
	fs.StringVar(&f.method, "method", string(mysqlv1beta1.BackupMethodLogical), "Logical or Physical")
	fs.StringVar(&f.instance, "source-instance", "", "the instance read from")
	fs.StringVar(&f.host, "source-host", "", "its address")
	fs.IntVar(&f.port, "source-port", 3306, "its port")
	fs.StringVar(&f.user, "user", "", "the account (its password: DOLPHIN_BACKUP_PASSWORD)")
	fs.StringVar(&f.mysqldump, "mysqldump", "mysqldump", "mysqldump (logical)")
	fs.StringVar(&f.mysqld, "mysqld", "mysqld", "mysqld (physical: the temporary server)")
	fs.StringVar(&f.work, "work", "", "physical: a folder with room for the whole data set")
	fs.StringVar(&f.tmp, "tmp", os.TempDir(), "a private folder")
	fs.StringVar(&f.report, "report", "/dev/termination-log", "where the result goes")
	f.register(fs)
	fs.DurationVar(&f.timeout, "timeout", time.Hour, "the whole run's deadline")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	for name, v := range map[string]string{"cluster": f.cluster, "name": f.name, "key": f.key,
		"source-instance": f.instance, "source-host": f.host, "user": f.user} {
		if v == "" {
			return f, fmt.Errorf("--%s is required", name)
		}
	}
	if err := f.check(); err != nil {
		return f, err
	}
	switch mysqlv1beta1.BackupMethod(f.method) {
	case mysqlv1beta1.BackupMethodLogical:
	case mysqlv1beta1.BackupMethodPhysical:
		if f.work == "" {
			return f, errors.New("--work is required with --method Physical")
		}
	default:
		return f, fmt.Errorf("--method %q: not Logical or Physical", f.method)
	}
	return f, nil
}

// store is the object store (or volume folder) the flags name.
type store interface {
	backup.Store
	backup.Reader
}

func (f storeFlags) store() (store, error) {
	if f.dir != "" {
		return &objectstore.Dir{Root: f.dir, Claim: f.claim}, nil
	}
	cfg := objectstore.Config{Endpoint: f.s3Endpoint, Region: f.s3Region, Bucket: f.s3Bucket, PathStyle: f.s3PathStyle,
		AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
	if f.s3CAFile != "" {
		ca, err := os.ReadFile(f.s3CAFile)
		if err != nil {
			return nil, fmt.Errorf("the CA bundle: %w", err)
		}
		cfg.CABundle = ca
	}
	return objectstore.New(cfg)
}

// runBackup takes the backup and writes its result to the report file, whatever
// happened: the operator reads it from the pod's status.
func runBackup(args []string) int {
	f, err := parseBackupFlags(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "manager backup:", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	m, err := func() (backup.Manifest, error) {
		st, err := f.store()
		if err != nil {
			return backup.Manifest{}, backup.Fail(mysqlv1beta1.ReasonNoBackupTarget, err)
		}
		src := backup.Source{Instance: f.instance, Host: f.host, Port: f.port, User: f.user,
			Password: os.Getenv("DOLPHIN_BACKUP_PASSWORD")}
		if f.method == string(mysqlv1beta1.BackupMethodPhysical) {
			return backup.Physical{Mysqld: f.mysqld, Work: f.work, Store: st, Cluster: f.cluster, Name: f.name, Key: f.key,
				Source: src}.Run(ctx)
		}
		return backup.Logical{Mysqldump: f.mysqldump, Tmp: f.tmp, Store: st, Cluster: f.cluster, Name: f.name, Key: f.key,
			Source: src}.Run(ctx)
	}()
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = backup.Fail(mysqlv1beta1.ReasonDeadlineExceeded, fmt.Errorf("not done within %s: %w", f.timeout, err))
	}
	return report("manager backup", f.report, backup.EncodeResult(m, err, mysqlv1beta1.ReasonBackupPodFailed), err)
}

// report writes a pod-side command's result where the operator reads it (the container's
// termination message) and to stdout (its log), and gives the exit code.
func report(cmd, path string, res []byte, err error) int {
	if werr := os.WriteFile(path, res, 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, cmd+": writing the report:", werr)
	}
	fmt.Println(string(res))
	if err != nil {
		fmt.Fprintln(os.Stderr, cmd+":", err)
		return 1
	}
	return 0
}

// operatorImage is the image this operator runs: DOLPHIN_OPERATOR_IMAGE when set, else
// its own pod's manager container's (POD_NAME and POD_NAMESPACE, from the downward API),
// so that backup pods run exactly the binary the operator is; "" when neither says.
func operatorImage(r client.Reader) string {
	if img := os.Getenv("DOLPHIN_OPERATOR_IMAGE"); img != "" {
		return img
	}
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	log := ctrl.Log.WithName("setup")
	if name == "" || ns == "" {
		log.Info("Backups cannot run: neither DOLPHIN_OPERATOR_IMAGE nor POD_NAME and POD_NAMESPACE are set")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		log.Error(err, "Backups cannot run: reading the operator's own pod for its image")
		return ""
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "manager" {
			return c.Image
		}
	}
	log.Info("Backups cannot run: the operator's pod has no container named manager", "pod", name)
	return ""
}
