// Package oci builds container images from local files without a container engine and
// writes each as an OCI image-layout tarball, which containerd imports
// (`ctr images import`) and a registry client can push.
//
// An image is one uncompressed layer: host folders copied in (later ones win on equal
// paths) plus single entries (files, folders, links) with their own owner and mode. The
// image model (config, manifest, digests) is go-containerregistry's; the layer is an
// uncompressed tar on disk, so a 400 MB tree is read once to write it and once to hash it,
// never gzipped. A tarball is cached by a key over its inputs (single files by content,
// trees by names, sizes, modes and modification times), so a warm run does not pack it
// again.
package oci

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec describes one image.
type Spec struct {
	// Name is the reference containerd records, e.g. localhost/dolphin/mysql:9.7.4.
	Name string
	// Trees are host folders copied into the image: Source's content lands under Target.
	Trees []Tree
	// Entries are added after the trees (and win over them).
	Entries []Entry
	// Config is the image's runtime configuration (entrypoint, user, env, labels, ...).
	Config v1.Config
}

// Tree is a host folder copied into the image, owned by root unless Owner says otherwise.
type Tree struct {
	Source string
	// Target is the folder in the image, "" for its root.
	Target string
}

// Entry is one file, folder or symbolic link of the image.
type Entry struct {
	// Path in the image, without a leading slash.
	Path string
	// Exactly one of: File (a host file copied), Content (bytes), Link (a symlink's
	// target), Dir (an empty folder).
	File    string
	Content []byte
	Link    string
	Dir     bool
	// Mode is the permission bits (with setuid/setgid/sticky); 0 means 0755 for folders
	// and executables copied from the host, 0644 for content.
	Mode     int64
	UID, GID int
}

// Built is a written image.
type Built struct {
	Name string `json:"name"`
	// Tarball is the OCI image-layout tar.
	Tarball string `json:"tarball"`
	// Digest is the manifest's digest (what containerd reports as the image's digest).
	Digest string `json:"digest"`
}

// Build writes the image's tarball into dir (created if needed), unless a tarball of the
// same inputs is already there.
func Build(s Spec, dir string) (Built, error) {
	if s.Name == "" {
		return Built{}, errors.New("oci: an image needs a name")
	}
	entries, key, err := s.collect()
	if err != nil {
		return Built{}, err
	}
	base := strings.NewReplacer("/", "_", ":", "_").Replace(s.Name) + "-" + key[:16]
	out := filepath.Join(dir, base+".tar")
	if b, err := readBuilt(out + ".json"); err == nil {
		if _, err := os.Stat(out); err == nil {
			return b, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Built{}, fmt.Errorf("while creating %s: %w", dir, err)
	}
	layerPath := filepath.Join(dir, base+".layer.tmp")
	defer os.Remove(layerPath)
	layer, err := writeLayer(layerPath, entries)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	if img, err = mutate.Config(img, s.Config); err != nil {
		return Built{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	img = mutate.MediaType(mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCIManifestSchema1)
	b, err := writeLayout(img, s.Name, layerPath, out)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", s.Name, err)
	}
	raw, _ := json.Marshal(b)
	if err := os.WriteFile(out+".json", raw, 0o644); err != nil {
		return Built{}, fmt.Errorf("while writing %s.json: %w", out, err)
	}
	prune(dir, base)
	return b, nil
}

// prune removes the tarballs of earlier inputs of the same image (same name, other key) in
// dir: a rebuilt operator would otherwise leave one tarball per build. A folder is meant
// for one writer at a time (a checkout's), or for images whose inputs rarely change.
func prune(dir, base string) {
	old, _ := filepath.Glob(filepath.Join(dir, base[:len(base)-16]+"*.tar*"))
	for _, p := range old {
		if !strings.HasPrefix(filepath.Base(p), base+".") {
			_ = os.Remove(p)
		}
	}
}

func readBuilt(p string) (Built, error) {
	var b Built
	raw, err := os.ReadFile(p)
	if err != nil {
		return b, err
	}
	return b, json.Unmarshal(raw, &b)
}

// item is one tar entry to write: its header and, for a regular file, where its bytes
// come from.
type item struct {
	hdr     tar.Header
	file    string
	content []byte
}

// collect lists every entry of the layer in path order and computes the cache key: the
// spec itself plus each host file's path, size, mode and modification time.
func (s Spec) collect() ([]item, string, error) {
	byPath := map[string]item{}
	h := sha256.New()
	cfg, _ := json.Marshal(s.Config)
	fmt.Fprintf(h, "%s\x00%s\x00", s.Name, cfg)
	for _, t := range s.Trees {
		if err := addTree(byPath, h, t); err != nil {
			return nil, "", err
		}
	}
	for _, e := range s.Entries {
		it, err := entryItem(e)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d:%d\x00%s\x00%x\x00", it.hdr.Name, it.hdr.Mode, it.hdr.Uid, it.hdr.Gid,
			it.hdr.Linkname, sha256.Sum256(it.content))
		if e.File != "" {
			// A single file is keyed by its content: binaries rebuilt unchanged (pause, by
			// every checkout) keep their key.
			if err := hashFile(h, e.File); err != nil {
				return nil, "", err
			}
		}
		byPath[it.hdr.Name] = it
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	items := make([]item, 0, len(paths))
	for _, p := range paths {
		items = append(items, byPath[p])
	}
	return items, hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("oci: reading %s: %w", p, err)
	}
	return nil
}

func addTree(byPath map[string]item, h io.Writer, t Tree) error {
	return filepath.WalkDir(t.Source, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("oci: %w", err)
		}
		rel, _ := filepath.Rel(t.Source, p)
		name := path.Join(t.Target, filepath.ToSlash(rel))
		if name == "." || name == "" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("oci: %w", err)
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return fmt.Errorf("oci: %w", err)
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("oci: %s: %w", p, err)
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = name, 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = unixZero, unixZero, unixZero
		hdr.Format = tar.FormatPAX
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%s\x00", name, info.Mode(), info.Size(), info.ModTime().UnixNano(), link)
		it := item{hdr: *hdr}
		if info.Mode().IsRegular() {
			it.file = p
		}
		byPath[name] = it
		return nil
	})
}

func entryItem(e Entry) (item, error) {
	name := strings.TrimPrefix(path.Clean(e.Path), "/")
	hdr := tar.Header{Name: name, Uid: e.UID, Gid: e.GID, Mode: e.Mode, ModTime: unixZero, Format: tar.FormatPAX}
	switch {
	case e.Dir:
		hdr.Typeflag = tar.TypeDir
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
		return item{hdr: hdr}, nil
	case e.Link != "":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.Link, 0o777
		return item{hdr: hdr}, nil
	case e.File != "":
		st, err := os.Stat(e.File)
		if err != nil {
			return item{}, fmt.Errorf("oci: %w", err)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
		if hdr.Mode == 0 {
			hdr.Mode = int64(st.Mode().Perm())
		}
		return item{hdr: hdr, file: e.File}, nil
	default:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Content))
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		return item{hdr: hdr, content: e.Content}, nil
	}
}

// writeLayer writes the layer tar and returns it as a v1.Layer.
func writeLayer(p string, items []item) (v1.Layer, error) {
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("while creating %s: %w", p, err)
	}
	defer f.Close()
	digest := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, digest)}
	tw := tar.NewWriter(counter)
	for _, it := range items {
		if err := writeItem(tw, it); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("while closing the layer: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("while writing %s: %w", p, err)
	}
	hash := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(digest.Sum(nil))}
	return &fileLayer{path: p, hash: hash, size: counter.n}, nil
}

func writeItem(tw *tar.Writer, it item) error {
	hdr := it.hdr
	if err := tw.WriteHeader(&hdr); err != nil {
		return fmt.Errorf("while writing %s: %w", hdr.Name, err)
	}
	switch {
	case it.file != "":
		src, err := os.Open(it.file)
		if err != nil {
			return fmt.Errorf("oci: %w", err)
		}
		defer src.Close()
		if _, err := io.CopyN(tw, src, hdr.Size); err != nil {
			return fmt.Errorf("while copying %s (did it change while packing?): %w", it.file, err)
		}
	case it.content != nil:
		if _, err := tw.Write(it.content); err != nil {
			return fmt.Errorf("while writing %s: %w", hdr.Name, err)
		}
	}
	return nil
}

// writeLayout writes the OCI image layout of img as a tar: oci-layout, index.json naming
// the image (containerd takes io.containerd.image.name), and the blobs.
func writeLayout(img v1.Image, name, layerPath, out string) (Built, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return Built{}, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return Built{}, err
	}
	mdigest, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	tag := name[strings.LastIndex(name, ":")+1:]
	index, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{{MediaType: types.OCIManifestSchema1, Digest: mdigest, Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}}}})
	layers, err := img.Layers()
	if err != nil {
		return Built{}, err
	}
	ldigest, err := layers[0].Digest()
	if err != nil {
		return Built{}, err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return Built{}, fmt.Errorf("while creating %s: %w", tmp, err)
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(n string, b []byte) error {
		return writeItem(tw, item{hdr: tar.Header{Name: n, Typeflag: tar.TypeReg, Size: int64(len(b)), Mode: 0o644, ModTime: unixZero}, content: b})
	}
	cdigest := sha256.Sum256(config)
	for _, e := range []struct {
		name string
		b    []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index},
		{"blobs/sha256/" + mdigest.Hex, manifest}, {"blobs/sha256/" + hex.EncodeToString(cdigest[:]), config}} {
		if err := add(e.name, e.b); err != nil {
			return Built{}, err
		}
	}
	st, err := os.Stat(layerPath)
	if err != nil {
		return Built{}, fmt.Errorf("oci: %w", err)
	}
	if err := writeItem(tw, item{hdr: tar.Header{Name: "blobs/sha256/" + ldigest.Hex, Typeflag: tar.TypeReg,
		Size: st.Size(), Mode: 0o644, ModTime: unixZero}, file: layerPath}); err != nil {
		return Built{}, err
	}
	if err := tw.Close(); err != nil {
		return Built{}, fmt.Errorf("while closing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return Built{}, fmt.Errorf("while writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return Built{}, fmt.Errorf("oci: %w", err)
	}
	return Built{Name: name, Tarball: out, Digest: mdigest.String()}, nil
}

// ReadConfig returns the configuration of the image in an OCI layout tarball written by
// Build.
func ReadConfig(tarball string) (*v1.ConfigFile, error) {
	blobs, err := readTar(tarball)
	if err != nil {
		return nil, err
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json with one manifest expected (%w)", tarball, err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(blobs["blobs/sha256/"+index.Manifests[0].Digest.Hex], &m); err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", tarball, err)
	}
	return v1.ParseConfigFile(bytes.NewReader(blobs["blobs/sha256/"+m.Config.Digest.Hex]))
}

// readTar reads the small members (metadata, not layers) of a tarball.
func readTar(p string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := walkTarFile(p, func(hdr *tar.Header, r io.Reader) error {
		if hdr.Size > 1<<20 {
			return nil
		}
		b, err := io.ReadAll(r)
		out[hdr.Name] = b
		return err
	})
	return out, err
}
