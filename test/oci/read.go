package oci

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// File is one entry of an image's layer, as its tar header and content have it.
type File struct {
	Mode     int64
	UID, GID int
	Dir      bool
	Link     string
	Size     int64
	// SHA256 is the content's digest; Content the content itself when under 1 MiB.
	SHA256  string
	Content []byte
}

// ReadImage returns the configuration and the files (by path, without a leading slash) of
// the image in an OCI layout tarball written by Build: what a runtime unpacks.
func ReadImage(tarball string) (*v1.ConfigFile, map[string]File, error) {
	cfg, err := ReadConfig(tarball)
	if err != nil {
		return nil, nil, err
	}
	blobs, err := readTar(tarball)
	if err != nil {
		return nil, nil, err
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, nil, fmt.Errorf("%s: index.json with one manifest expected (%w)", tarball, err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(blobs["blobs/sha256/"+index.Manifests[0].Digest.Hex], &m); err != nil {
		return nil, nil, fmt.Errorf("%s: manifest: %w", tarball, err)
	}
	if len(m.Layers) != 1 {
		return nil, nil, fmt.Errorf("%s: %d layers, Build writes one", tarball, len(m.Layers))
	}
	files, err := layerFiles(tarball, "blobs/sha256/"+m.Layers[0].Digest.Hex)
	return cfg, files, err
}

// layerFiles lists the entries of the uncompressed layer stored as member in tarball.
func layerFiles(tarball, member string) (map[string]File, error) {
	var files map[string]File
	err := walkTarFile(tarball, func(hdr *tar.Header, r io.Reader) error {
		if hdr.Name != member {
			return nil
		}
		var err error
		files, err = readLayer(r)
		return errStop(err)
	})
	if err != nil {
		return nil, err
	}
	if files == nil {
		return nil, fmt.Errorf("%s: no layer %s", tarball, member)
	}
	return files, nil
}

// errDone ends a walk early without an error.
var errDone = errors.New("done")

func errStop(err error) error {
	if err != nil {
		return err
	}
	return errDone
}

// walkTarFile calls fn for every entry of the tar file p, in order, with a reader of its
// content; fn returning errDone ends the walk without an error.
func walkTarFile(p string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	defer f.Close()
	if err := walkTar(f, fn); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

func walkTar(r io.Reader, fn func(*tar.Header, io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(hdr, tr); errors.Is(err, errDone) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
}

func readLayer(layer io.Reader) (map[string]File, error) {
	files := map[string]File{}
	err := walkTar(layer, func(hdr *tar.Header, r io.Reader) error {
		f := File{Mode: hdr.Mode, UID: hdr.Uid, GID: hdr.Gid, Size: hdr.Size, Dir: hdr.Typeflag == tar.TypeDir}
		if hdr.Typeflag == tar.TypeSymlink {
			f.Link = hdr.Linkname
		}
		if hdr.Typeflag == tar.TypeReg {
			h := sha256.New()
			if hdr.Size < 1<<20 {
				var err error
				if f.Content, err = io.ReadAll(r); err != nil {
					return err
				}
				h.Write(f.Content)
			} else if _, err := io.Copy(h, r); err != nil {
				return err
			}
			f.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		files[path.Clean(hdr.Name)] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oci: layer: %w", err)
	}
	return files, nil
}

// LoadImage unpacks an OCI image-layout tarball (one image, as Build writes) into dir and
// returns its image, whose blobs are read from dir: what a registry client pushes.
func LoadImage(tarball, dir string) (v1.Image, error) {
	err := walkTarFile(tarball, func(h *tar.Header, r io.Reader) error {
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			return writeFrom(p, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("while unpacking: %w", err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is no OCI image layout: %w", tarball, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tarball, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want one", tarball, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

func writeFrom(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
