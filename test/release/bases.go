package release

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// Base images our Dockerfiles and the operator-framework's start from, as specs: what of
// them the images built on top use. Not carried: CA certificates and time zone data
// (nothing on the ground dials TLS to a public CA or reads a zone).
const (
	DistrolessNonroot = "gcr.io/distroless/static:nonroot"
	DistrolessDebug   = "gcr.io/distroless/static:debug"
	nonrootUID        = 65532
)

// path as distroless sets it; :debug adds /busybox.
const distrolessPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// basePasswd is /etc/passwd's root and nobody, which every base image has.
const basePasswd = "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"

// BaseEntries are /etc/passwd and /etc/group (root, nobody and the given users, each with
// a group of its own id, in the order given) and a world-writable /tmp.
func BaseEntries(users ...User) []oci.Entry {
	passwd := basePasswd
	group := "root:x:0:\nnobody:x:65534:\n"
	for _, u := range users {
		home := u.Home
		if home == "" {
			home = "/nonexistent"
		}
		passwd += fmt.Sprintf("%s:x:%d:%d:%s:%s:/usr/sbin/nologin\n", u.Name, u.ID, u.ID, u.Name, home)
		group += fmt.Sprintf("%s:x:%d:\n", u.Name, u.ID)
	}
	return []oci.Entry{
		{Path: "etc", Dir: true},
		{Path: "etc/passwd", Content: []byte(passwd)},
		{Path: "etc/group", Content: []byte(group)},
		{Path: "tmp", Dir: true, Mode: 0o1777},
	}
}

// User is an account of an image's /etc/passwd.
type User struct {
	Name string
	ID   int
	Home string
}

// Nonroot is distroless's static:nonroot: user 65532 with its home, distroless's PATH.
func Nonroot() oci.Spec {
	return oci.Spec{
		Entries: append(BaseEntries(User{Name: "nonroot", ID: nonrootUID, Home: "/home/nonroot"}),
			oci.Entry{Path: "home", Dir: true},
			oci.Entry{Path: "home/nonroot", Dir: true, Mode: 0o700, UID: nonrootUID, GID: nonrootUID}),
		Config: v1.Config{User: fmt.Sprint(nonrootUID), WorkingDir: "/home/nonroot", Env: []string{distrolessPath}},
	}
}

// Debug is distroless's static:debug: root, a static busybox at /busybox with a link per
// applet, /busybox on PATH and its shell as the entrypoint.
func Debug(b Busybox) (oci.Spec, error) {
	entries, err := b.entries("busybox")
	if err != nil {
		return oci.Spec{}, err
	}
	return oci.Spec{
		Entries: append(BaseEntries(), entries...),
		Config:  v1.Config{Entrypoint: []string{"/busybox/sh"}, Env: []string{distrolessPath + ":/busybox"}},
	}, nil
}

// Busybox are the files of a provisioned busybox (hack/busybox/provision.sh).
type Busybox struct{ Binary, Applets string }

// BusyboxIn is the provisioned busybox in the cache folder dir.
func BusyboxIn(dir string) Busybox {
	return Busybox{Binary: filepath.Join(dir, "busybox"), Applets: filepath.Join(dir, "APPLETS")}
}

// entries are the busybox binary in the image folder dir and a link to it per applet.
func (b Busybox) entries(dir string) ([]oci.Entry, error) {
	raw, err := os.ReadFile(b.Applets)
	if err != nil {
		return nil, fmt.Errorf("busybox applets: %w (run `make busybox`)", err)
	}
	entries := []oci.Entry{{Path: dir, Dir: true}, {Path: dir + "/busybox", File: b.Binary, Mode: 0o755}}
	for _, a := range strings.Fields(string(raw)) {
		if a != "busybox" && !strings.ContainsAny(a, "/[") {
			entries = append(entries, oci.Entry{Path: dir + "/" + a, Link: "busybox"})
		}
	}
	return entries, nil
}

// contextOf makes a build context under dir: each name (a path relative to the context)
// is a link to its host file. The images' layers copy the files the links point to.
func contextOf(dir string, files map[string]string) (string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		target, err := filepath.Abs(files[name])
		if err != nil {
			return "", err
		}
		if err := os.Symlink(target, p); err != nil {
			return "", fmt.Errorf("build context %s: %w", dir, err)
		}
	}
	return dir, nil
}
