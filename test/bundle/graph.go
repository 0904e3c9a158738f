package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"
)

// Catalog is the part of a file-based catalog the upgrade graph is made of. It is parsed here,
// not with operator-registry, so the test does not trust the library that wrote the catalog.
type Catalog struct {
	Packages map[string]string             // package name -> default channel
	Bundles  map[string]semver.Version     // bundle name -> version
	Channels map[string]map[string][]Entry // package -> channel -> entries
	Images   map[string]string             // bundle name -> image
}

// Entry is one olm.channel entry: the bundle and the edges into it.
type Entry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

type blob struct {
	Schema         string  `json:"schema"`
	Name           string  `json:"name"`
	Package        string  `json:"package"`
	DefaultChannel string  `json:"defaultChannel"`
	Image          string  `json:"image"`
	Entries        []Entry `json:"entries"`
	Properties     []struct {
		Type  string `json:"type"`
		Value struct {
			PackageName string `json:"packageName"`
			Version     string `json:"version"`
		} `json:"value"`
	} `json:"properties"`
}

// LoadCatalog reads a multi-document YAML catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &Catalog{
		Packages: map[string]string{}, Bundles: map[string]semver.Version{},
		Channels: map[string]map[string][]Entry{}, Images: map[string]string{},
	}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var b blob
		if err := yaml.Unmarshal(doc, &b); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if err := c.add(b); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
	}
	return c, nil
}

func (c *Catalog) add(b blob) error {
	switch b.Schema {
	case "olm.package":
		c.Packages[b.Name] = b.DefaultChannel
	case "olm.channel":
		if c.Channels[b.Package] == nil {
			c.Channels[b.Package] = map[string][]Entry{}
		}
		c.Channels[b.Package][b.Name] = b.Entries
	case "olm.bundle":
		for _, p := range b.Properties {
			if p.Type != "olm.package" {
				continue
			}
			v, err := semver.Parse(p.Value.Version)
			if err != nil {
				return fmt.Errorf("bundle %s: version: %w", b.Name, err)
			}
			c.Bundles[b.Name] = v
		}
		c.Images[b.Name] = b.Image
	default:
		return fmt.Errorf("unexpected schema %q", b.Schema)
	}
	return nil
}

// CheckChannel proves what a subscriber of the channel relies on: the channel has one head,
// the head is the newest version in the channel, and from every entry OLM can walk upgrade
// edges (replaces, skips, skipRange) to the head.
func (c *Catalog) CheckChannel(pkg, channel string) (head string, err error) {
	entries := c.Channels[pkg][channel]
	if len(entries) == 0 {
		return "", fmt.Errorf("channel %s/%s is empty or missing", pkg, channel)
	}
	for _, e := range entries {
		if _, ok := c.Bundles[e.Name]; !ok {
			return "", fmt.Errorf("channel %s: entry %s has no bundle", channel, e.Name)
		}
	}
	heads := c.heads(entries)
	if len(heads) != 1 {
		return "", fmt.Errorf("channel %s: want one head, found %v", channel, heads)
	}
	head = heads[0]
	for _, e := range entries {
		if c.Bundles[e.Name].GT(c.Bundles[head]) {
			return "", fmt.Errorf("channel %s: head %s (%s) is older than %s (%s)",
				channel, head, c.Bundles[head], e.Name, c.Bundles[e.Name])
		}
	}
	var stranded []string
	for _, e := range entries {
		if !c.reaches(entries, e.Name, head) {
			stranded = append(stranded, e.Name)
		}
	}
	if len(stranded) > 0 {
		return "", fmt.Errorf("channel %s: %s cannot upgrade to the head %s", channel, strings.Join(stranded, ", "), head)
	}
	return head, nil
}

// heads are the entries no other entry upgrades from them to, as OLM computes the head.
func (c *Catalog) heads(entries []Entry) []string {
	var heads []string
	for _, e := range entries {
		replaced := false
		for _, other := range entries {
			if other.Name != e.Name && c.upgradesFrom(other, e.Name) {
				replaced = true
			}
		}
		if !replaced {
			heads = append(heads, e.Name)
		}
	}
	return heads
}

// upgradesFrom reports whether OLM offers entry `to` to a subscriber at bundle `from`.
func (c *Catalog) upgradesFrom(to Entry, from string) bool {
	if to.Replaces == from || slices.Contains(to.Skips, from) {
		return true
	}
	if to.SkipRange == "" {
		return false
	}
	r, err := semver.ParseRange(to.SkipRange)
	return err == nil && r(c.Bundles[from])
}

func (c *Catalog) reaches(entries []Entry, from, head string) bool {
	seen := map[string]bool{}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == head {
			return true
		}
		if seen[cur] {
			continue
		}
		seen[cur] = true
		for _, e := range entries {
			if c.upgradesFrom(e, cur) {
				queue = append(queue, e.Name)
			}
		}
	}
	return false
}

// ErrNoSkipRange is returned by ValidateSkipRanges for an entry whose skipRange does not parse.
var ErrNoSkipRange = errors.New("skipRange does not parse")

// ValidateSkipRanges checks that every skipRange in the catalog is a valid semver range.
func (c *Catalog) ValidateSkipRanges() error {
	for pkg, channels := range c.Channels {
		for ch, entries := range channels {
			for _, e := range entries {
				if e.SkipRange == "" {
					continue
				}
				if _, err := semver.ParseRange(e.SkipRange); err != nil {
					return fmt.Errorf("%s/%s entry %s: %w: %w", pkg, ch, e.Name, ErrNoSkipRange, err)
				}
			}
		}
	}
	return nil
}
