package release

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/oci"
)

func writeDockerfile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "Dockerfile")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestParseDockerfile(t *testing.T) {
	d, err := ParseDockerfile(writeDockerfile(t, `# comment
ARG BASE=x
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
RUN go build \
    # a comment inside a continuation
    ./cmd
FROM scratch
LABEL a=1 \
      b="two words" c="with \"quote\""
COPY --from=builder /out /bin/
ENTRYPOINT ["/bin/x", "--flag"]
CMD serve it
`))
	require.NoError(t, err)
	require.Len(t, d.Stages, 2)
	require.Equal(t, Stage{From: "golang:1.26", Name: "builder", Instructions: d.Stages[0].Instructions}, d.Stages[0])
	require.Equal(t, "go build  ./cmd", d.Stages[0].Instructions[0].Raw)
	final := d.Final().Instructions
	kv, err := keyValues(final[0])
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1", "b": "two words", "c": `with "quote"`}, kv)
	require.Equal(t, map[string]string{"from": "builder"}, final[1].Flags)
	require.Equal(t, []string{"/out", "/bin/"}, final[1].Args)
	require.True(t, final[2].Exec)
	require.Equal(t, []string{"/bin/x", "--flag"}, final[2].Args)
	require.Equal(t, []string{"/bin/sh", "-c", "serve it"}, command(final[3]))

	for name, text := range map[string]string{
		"no FROM":         "LABEL a=b\n",
		"unknown":         "FROM scratch\nHEALTHCHECK NONE\n",
		"heredoc":         "FROM scratch\nRUN <<EOF\necho\nEOF\n",
		"bad exec form":   "FROM scratch\nENTRYPOINT [\"/x\"\n",
		"unclosed quote":  "FROM scratch\nLABEL a=\"b\n",
		"FROM of 2 words": "FROM a b\n",
	} {
		_, err := ParseDockerfile(writeDockerfile(t, text))
		require.Error(t, err, name)
	}
}

// Build applies the final stage as an engine would: ENTRYPOINT resets the base's CMD,
// COPY puts a folder's content under its destination and a file at it (or into it with a
// trailing slash), variables come from ARG and ENV, and what needs a container is refused.
func TestBuildAppliesTheFinalStage(t *testing.T) {
	ctx := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ctx, "tree", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ctx, "tree", "sub", "f"), []byte("f"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ctx, "one"), []byte("1"), 0o755))
	out := filepath.Join(t.TempDir(), "built")
	require.NoError(t, os.WriteFile(out, []byte("b"), 0o755))
	base := oci.Spec{Config: oci.Spec{}.Config}
	base.Config.Cmd = []string{"base-cmd"}
	base.Config.Env = []string{"PATH=/bin"}
	d, err := ParseDockerfile(writeDockerfile(t, `FROM base
ARG DIR=/opt
ENV HOME=/home/x
WORKDIR ${HOME}
COPY tree ${DIR}/tree
COPY one ./
COPY one /renamed
COPY --from=builder --chown=7:8 /out /usr/bin/
LABEL version="${DIR}"
USER 7:8
ENTRYPOINT ["/usr/bin/out"]
`))
	require.NoError(t, err)
	s, err := Build(d, Inputs{Name: "x:1", Context: ctx, Bases: map[string]oci.Spec{"base": base},
		Stages: map[string]map[string]string{"builder": {"/out": out}}, BuildArgs: map[string]string{"DIR": "/srv"}})
	require.NoError(t, err)
	require.Equal(t, "x:1", s.Name)
	require.Nil(t, s.Config.Cmd, "a new ENTRYPOINT resets the base's CMD")
	require.Equal(t, []string{"/usr/bin/out"}, s.Config.Entrypoint)
	require.Equal(t, "/home/x", s.Config.WorkingDir)
	require.Equal(t, "7:8", s.Config.User)
	require.Equal(t, map[string]string{"version": "/srv"}, s.Config.Labels)
	require.Contains(t, s.Config.Env, "HOME=/home/x")
	require.Equal(t, []oci.Tree{{Source: filepath.Join(ctx, "tree"), Target: "srv/tree"}}, s.Trees)
	paths := map[string]oci.Entry{}
	for _, e := range s.Entries {
		paths[e.Path] = e
	}
	require.Equal(t, filepath.Join(ctx, "one"), paths["home/x/one"].File)
	require.Equal(t, filepath.Join(ctx, "one"), paths["renamed"].File)
	require.Equal(t, oci.Entry{Path: "usr/bin/out", File: out, UID: 7, GID: 8}, paths["usr/bin/out"])
	require.True(t, paths["home/x"].Dir)
	require.Equal(t, []string{"base-cmd"}, base.Config.Cmd, "the base is not changed")

	for name, text := range map[string]string{
		"RUN without its effect":    "FROM scratch\nRUN echo hi\n",
		"an unknown base":           "FROM other\n",
		"a variable never defined":  "FROM scratch\nLABEL a=${NOPE}\n",
		"a missing stage output":    "FROM scratch\nCOPY --from=builder /other /x\n",
		"a missing context file":    "FROM scratch\nCOPY nothing /x\n",
		"an archive that ADD opens": "FROM scratch\nADD x.tar.gz /x\n",
	} {
		d, err := ParseDockerfile(writeDockerfile(t, text))
		require.NoError(t, err, name)
		_, err = Build(d, Inputs{Context: ctx, Stages: map[string]map[string]string{"builder": {"/out": out}}})
		require.Error(t, err, name)
	}
	d, err = ParseDockerfile(writeDockerfile(t, "FROM scratch\nRUN [\"/busybox/ln\", \"-s\", \"a\", \"/b\"]\n"))
	require.NoError(t, err)
	s, err = Build(d, Inputs{Runs: map[string][]oci.Entry{`["/busybox/ln", "-s", "a", "/b"]`: {{Path: "b", Link: "a"}}}})
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(s.Entries, func(e oci.Entry) bool { return e.Path == "b" && e.Link == "a" }),
		"a RUN's given effect is applied: %v", s.Entries)
}
