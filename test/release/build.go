package release

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dolphin-operator/dolphin/test/oci"
)

// Inputs are what building a Dockerfile's final stage takes besides the Dockerfile.
type Inputs struct {
	// Name is the image's reference.
	Name string
	// Context is the build context: COPY and ADD sources without --from.
	Context string
	// Bases are the images a FROM may name, as specs ("scratch" needs none).
	Bases map[string]oci.Spec
	// Stages are what earlier stages produced, by stage name: a path in that stage's file
	// system to the host file or folder holding it. The caller makes them as the stage's
	// RUN lines would (a Go build, opm's cache).
	Stages map[string]map[string]string
	// Runs are the effects of the final stage's RUN lines, by the line's text: what the
	// command adds to the file system. A RUN without one is refused, so that a changed
	// line is noticed.
	Runs map[string][]oci.Entry
	// BuildArgs are --build-arg values; an ARG without one takes its default.
	BuildArgs map[string]string
}

// Build turns the final stage of d into an image spec: the base's content and config,
// then every instruction in order, as a container engine would apply them. Instructions
// that need a container to run (RUN) are refused in the final stage: nothing here can run
// them, and an image without their effect would not be the Dockerfile's.
func Build(d *Dockerfile, in Inputs) (oci.Spec, error) {
	final := d.Final()
	s, err := base(final.From, in.Bases)
	if err != nil {
		return oci.Spec{}, fmt.Errorf("%s: %w", d.Path, err)
	}
	s.Name = in.Name
	vars := map[string]string{}
	for _, e := range s.Config.Env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	for _, ins := range final.Instructions {
		ins, err := expand(ins, vars, in.BuildArgs)
		if err != nil {
			return oci.Spec{}, fmt.Errorf("%s:%d: %w", d.Path, ins.Line, err)
		}
		if err := apply(&s, ins, in); err != nil {
			return oci.Spec{}, fmt.Errorf("%s:%d: %w", d.Path, ins.Line, err)
		}
	}
	return s, nil
}

// base is a copy of the spec FROM names, so that applying instructions never changes it.
func base(from string, bases map[string]oci.Spec) (oci.Spec, error) {
	if from == "scratch" {
		return oci.Spec{}, nil
	}
	b, ok := bases[from]
	if !ok {
		return oci.Spec{}, fmt.Errorf("no base image %s is known (known: %s)", from, strings.Join(slices.Sorted(maps.Keys(bases)), ", "))
	}
	s := oci.Spec{Trees: slices.Clone(b.Trees), Entries: slices.Clone(b.Entries), Config: *b.Config.DeepCopy()}
	return s, nil
}

// expand substitutes ${NAME} and $NAME from the ARGs and ENVs seen so far, as the engine
// does for every instruction but RUN (whose shell expands them), and records ARG and ENV.
func expand(ins Instruction, vars, buildArgs map[string]string) (Instruction, error) {
	if ins.Cmd == "RUN" {
		return ins, nil
	}
	if strings.Contains(ins.Raw, "$") {
		var missing []string
		raw := os.Expand(ins.Raw, func(k string) string {
			v, ok := vars[k]
			if !ok {
				missing = append(missing, k)
			}
			return v
		})
		if len(missing) > 0 {
			return ins, fmt.Errorf("%s uses %s, which no ARG or ENV defines", ins.Cmd, strings.Join(missing, ", "))
		}
		out, err := parseInstruction(ins.Cmd+" "+raw, ins.Line)
		if err != nil {
			return ins, err
		}
		ins = out
	}
	switch ins.Cmd {
	case "ARG":
		for _, a := range ins.Args {
			k, def, _ := strings.Cut(a, "=")
			if v, ok := buildArgs[k]; ok {
				def = v
			}
			vars[k] = def
		}
	case "ENV":
		kv, err := keyValues(ins)
		if err != nil {
			return ins, err
		}
		maps.Copy(vars, kv)
	}
	return ins, nil
}

func apply(s *oci.Spec, ins Instruction, in Inputs) error {
	switch ins.Cmd {
	case "ARG":
	case "RUN":
		effect, ok := in.Runs[ins.Raw]
		if !ok {
			return fmt.Errorf("RUN %s cannot run without a container engine, and no effect was given for it", ins.Raw)
		}
		s.Entries = append(s.Entries, effect...)
	case "LABEL":
		kv, err := keyValues(ins)
		if err != nil {
			return err
		}
		if s.Config.Labels == nil {
			s.Config.Labels = map[string]string{}
		}
		maps.Copy(s.Config.Labels, kv)
	case "ENV":
		kv, err := keyValues(ins)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			s.Config.Env = setEnv(s.Config.Env, k, kv[k])
		}
	case "USER":
		s.Config.User = strings.Join(ins.Args, "")
	case "WORKDIR":
		s.Config.WorkingDir = resolve(s.Config.WorkingDir, strings.Join(ins.Args, " "))
		if s.Config.WorkingDir != "/" {
			s.Entries = append(s.Entries, oci.Entry{Path: strings.TrimPrefix(s.Config.WorkingDir, "/"), Dir: true})
		}
	case "ENTRYPOINT":
		s.Config.Entrypoint = command(ins)
		s.Config.Cmd = nil // a new entrypoint resets the base's CMD, as Docker does
	case "CMD":
		s.Config.Cmd = command(ins)
	case "EXPOSE":
		if s.Config.ExposedPorts == nil {
			s.Config.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range ins.Args {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			s.Config.ExposedPorts[p] = struct{}{}
		}
	case "COPY", "ADD":
		return copyInto(s, ins, in)
	default:
		return fmt.Errorf("%s cannot be applied without a container engine", ins.Cmd)
	}
	return nil
}

func command(ins Instruction) []string {
	if ins.Exec {
		return slices.Clone(ins.Args)
	}
	return []string{"/bin/sh", "-c", ins.Raw}
}

func setEnv(env []string, k, v string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, k+"=") })
	return append(out, k+"="+v)
}

// resolve is p against the working folder, as an absolute image path.
func resolve(workdir, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = path.Join("/", workdir, p)
	}
	return path.Clean(p)
}

// copyInto adds COPY's or ADD's sources at their destination with Docker's rules: a folder's
// content goes under the destination; a file goes to the destination, or into it when the
// destination ends with a slash or there are several sources.
func copyInto(s *oci.Spec, ins Instruction, in Inputs) error {
	if len(ins.Args) < 2 {
		return fmt.Errorf("%s needs a source and a destination", ins.Cmd)
	}
	for f := range ins.Flags {
		if f != "from" && f != "chown" {
			return fmt.Errorf("%s --%s is not supported", ins.Cmd, f)
		}
	}
	uid, gid, err := owner(ins.Flags["chown"])
	if err != nil {
		return err
	}
	srcs, dst := ins.Args[:len(ins.Args)-1], ins.Args[len(ins.Args)-1]
	into := strings.HasSuffix(dst, "/") || dst == "." || len(srcs) > 1
	dst = resolve(s.Config.WorkingDir, dst)
	for _, src := range srcs {
		host, err := source(ins, in, src)
		if err != nil {
			return err
		}
		fi, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("%s %s: %w", ins.Cmd, src, err)
		}
		target := strings.TrimPrefix(dst, "/")
		switch {
		case fi.IsDir():
			if uid != 0 || gid != 0 {
				return fmt.Errorf("%s --chown of a folder is not supported", ins.Cmd)
			}
			// A link to a folder (a build context of links) is copied as the folder.
			if host, err = filepath.EvalSymlinks(host); err != nil {
				return fmt.Errorf("%s %s: %w", ins.Cmd, src, err)
			}
			s.Trees = append(s.Trees, oci.Tree{Source: host, Target: target})
		case into:
			s.Entries = append(s.Entries, oci.Entry{Path: path.Join(target, path.Base(src)), File: host, UID: uid, GID: gid})
		default:
			s.Entries = append(s.Entries, oci.Entry{Path: target, File: host, UID: uid, GID: gid})
		}
	}
	return nil
}

// source is where a COPY or ADD source is on the host.
func source(ins Instruction, in Inputs, src string) (string, error) {
	from, ok := ins.Flags["from"]
	if !ok {
		if in.Context == "" {
			return "", fmt.Errorf("%s %s: no build context", ins.Cmd, src)
		}
		p := filepath.Join(in.Context, filepath.Clean("/"+src))
		if ins.Cmd == "ADD" && isArchive(p) {
			return "", fmt.Errorf("ADD of the archive %s (unpacked by ADD) is not supported", src)
		}
		return p, nil
	}
	stage, ok := in.Stages[from]
	if !ok {
		return "", fmt.Errorf("%s --from=%s: no output of stage %s was given", ins.Cmd, from, from)
	}
	p, ok := stage[path.Clean(src)]
	if !ok {
		return "", fmt.Errorf("%s --from=%s %s: stage %s's output has no %s", ins.Cmd, from, src, from, src)
	}
	return p, nil
}

func isArchive(p string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

func owner(chown string) (int, int, error) {
	if chown == "" {
		return 0, 0, nil
	}
	u, g, ok := strings.Cut(chown, ":")
	if !ok {
		g = u
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("--chown=%s: only numeric ids are supported", chown)
	}
	return uid, gid, nil
}
