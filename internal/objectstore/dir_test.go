package objectstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestADirStoresWholeFilesOnly(t *testing.T) {
	d := &Dir{Root: t.TempDir(), Claim: "nas"}
	obj, err := d.Put(context.Background(), "ns/db/base/b1/dump.sql.zst", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("hello"))
	if obj.Size != 5 || obj.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("got %+v", obj)
	}
	if got, _ := os.ReadFile(filepath.Join(d.Root, "ns/db/base/b1/dump.sql.zst")); string(got) != "hello" {
		t.Errorf("stored %q", got)
	}
	if d.URL(obj.Key) != "pvc://nas/ns/db/base/b1/dump.sql.zst" {
		t.Errorf("url %s", d.URL(obj.Key))
	}
	// A reader that fails half way leaves nothing, not even the temporary file.
	_, err = d.Put(context.Background(), "ns/db/base/b2/dump.sql.zst", &failing{})
	if err == nil {
		t.Fatal("a failed read must fail the put")
	}
	if left, _ := filepath.Glob(filepath.Join(d.Root, "ns/db/base/b2/*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := d.Put(context.Background(), "../outside", strings.NewReader("x")); err == nil {
		t.Error("a key outside the store must be refused")
	}
	if err := d.Delete(context.Background(), obj.Key, "ns/never/there"); err != nil {
		t.Errorf("delete: %v", err)
	}
}

type failing struct{ n int }

func (f *failing) Read(p []byte) (int, error) {
	if f.n > 0 {
		return 0, errors.New("connection reset")
	}
	f.n++
	return copy(p, "partial"), nil
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, cfg := range []Config{
		{AccessKeyID: "a", SecretAccessKey: "b"},
		{Bucket: "b"},
		{Bucket: "b", AccessKeyID: "a", SecretAccessKey: "b", Endpoint: "s3.example.com"},
		{Bucket: "b", AccessKeyID: "a", SecretAccessKey: "b", CABundle: []byte("not pem")},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := New(Config{Bucket: "b", AccessKeyID: "a", SecretAccessKey: "b"}); err != nil {
		t.Errorf("a bucket and keys are enough: %v", err)
	}
}
