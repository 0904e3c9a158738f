package release

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Instruction is one Dockerfile instruction: its keyword (upper case), its flags
// (--from=builder) and its arguments, continuation lines joined.
type Instruction struct {
	Cmd   string
	Flags map[string]string
	// Args are the words of the instruction; Exec is true when they were written in JSON
	// (exec) form.
	Args []string
	Exec bool
	// Raw is the instruction's text after the keyword.
	Raw  string
	Line int
}

// Stage is one FROM and what follows it.
type Stage struct {
	From, Name   string
	Instructions []Instruction
}

// Dockerfile is a parsed Dockerfile.
type Dockerfile struct {
	Path   string
	Stages []Stage
}

// Final is the stage that makes the image.
func (d *Dockerfile) Final() Stage { return d.Stages[len(d.Stages)-1] }

// ParseDockerfile reads the subset of the Dockerfile syntax our Dockerfiles use: comments,
// line continuations, and FROM/LABEL/ENV/ARG/USER/WORKDIR/ENTRYPOINT/CMD/COPY/ADD/RUN/EXPOSE
// in shell or exec form. Parser directives and heredocs are refused, not misread.
func ParseDockerfile(path string) (*Dockerfile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading %s: %w", path, err)
	}
	d := &Dockerfile{Path: path}
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue // a comment inside a continuation is dropped, the continuation goes on
			}
			line = strings.TrimSuffix(line, "\\") + " " + next
		}
		in, err := parseInstruction(line, start)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, start, err)
		}
		if in.Cmd == "FROM" {
			if len(in.Args) != 1 && (len(in.Args) != 3 || !strings.EqualFold(in.Args[1], "AS")) {
				return nil, fmt.Errorf("%s:%d: FROM wants an image and an optional AS name", path, start)
			}
			st := Stage{From: in.Args[0]}
			if len(in.Args) == 3 {
				st.Name = in.Args[2]
			}
			d.Stages = append(d.Stages, st)
			continue
		}
		if len(d.Stages) == 0 {
			if in.Cmd == "ARG" {
				continue // a build argument for FROM lines; ours use none
			}
			return nil, fmt.Errorf("%s:%d: %s before the first FROM", path, start, in.Cmd)
		}
		last := &d.Stages[len(d.Stages)-1]
		last.Instructions = append(last.Instructions, in)
	}
	if len(d.Stages) == 0 {
		return nil, fmt.Errorf("%s has no FROM", path)
	}
	return d, nil
}

var known = map[string]bool{"LABEL": true, "ENV": true, "ARG": true, "USER": true, "WORKDIR": true,
	"ENTRYPOINT": true, "CMD": true, "COPY": true, "ADD": true, "RUN": true, "EXPOSE": true, "FROM": true}

func parseInstruction(line string, n int) (Instruction, error) {
	word, rest, _ := strings.Cut(line, " ")
	in := Instruction{Cmd: strings.ToUpper(word), Raw: strings.TrimSpace(rest), Line: n, Flags: map[string]string{}}
	if !known[in.Cmd] {
		return in, fmt.Errorf("instruction %s is not supported", word)
	}
	if strings.Contains(in.Raw, "<<") {
		return in, fmt.Errorf("heredocs are not supported")
	}
	rest = in.Raw
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		in.Flags[k] = v
		rest = strings.TrimSpace(after)
	}
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &in.Args); err != nil {
			return in, fmt.Errorf("%s: exec form is not a JSON list of strings: %w", in.Cmd, err)
		}
		in.Exec = true
		return in, nil
	}
	words, err := splitWords(rest)
	if err != nil {
		return in, fmt.Errorf("%s: %w", in.Cmd, err)
	}
	in.Args = words
	return in, nil
}

// splitWords splits on blanks outside double quotes and drops the quotes (a backslash
// escapes the next character inside them), as LABEL and ENV values are written.
func splitWords(s string) ([]string, error) {
	var words []string
	var b strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '"':
			quoted = !quoted
			inWord = true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, b.String())
	}
	return words, nil
}

// keyValues reads LABEL's and ENV's k=v words.
func keyValues(in Instruction) (map[string]string, error) {
	kv := map[string]string{}
	for _, w := range in.Args {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: %s %q is not key=value", in.Line, in.Cmd, w)
		}
		kv[k] = v
	}
	return kv, nil
}
