package objectstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a store in a mounted volume's folder: the same keys as a bucket's, as paths.
type Dir struct {
	// Root is the folder; Claim names its volume in URLs (pvc://claim/key).
	Root, Claim string
}

// URL is where key is: pvc://claim/key.
func (d *Dir) URL(key string) string { return "pvc://" + d.Claim + "/" + key }

func (d *Dir) path(key string) (string, error) {
	p := filepath.Join(d.Root, filepath.FromSlash(key))
	if !strings.HasPrefix(p, filepath.Clean(d.Root)+string(filepath.Separator)) {
		return "", fmt.Errorf("key %q is outside the store", key)
	}
	return p, nil
}

// Get reads the file at key.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading %s: %w", d.URL(key), ErrNotFound)
		}
		return nil, fmt.Errorf("reading %s: %w", d.URL(key), err)
	}
	return readCloser{ctxReader{ctx, f}, f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Put writes r to key through a temporary file, synced and renamed into place: nothing
// is at key until all of it is.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	p, err := d.path(key)
	if err != nil {
		return Object{}, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return Object{}, fmt.Errorf("storing %s: %w", d.URL(key), err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.partial")
	if err != nil {
		return Object{}, fmt.Errorf("storing %s: %w", d.URL(key), err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return Object{}, fmt.Errorf("storing %s: %w", d.URL(key), err)
	}
	return Object{Key: key, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Delete removes the keys; one already gone is no error.
func (d *Dir) Delete(_ context.Context, keys ...string) error {
	for _, k := range keys {
		p, err := d.path(k)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("deleting %s: %w", d.URL(k), err)
		}
	}
	return nil
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
