package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README and docs/ link into each other and into the code: every
// relative link must reach a file, and a #fragment a heading of it, so that
// moving a section or a file cannot leave a reader at a dead end. No
// network: links with a scheme are not followed.

var (
	inlineLink    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	referenceLink = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan      = regexp.MustCompile("`[^`\n]*`")
	scheme        = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	checked := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range markdownLinks(string(text)) {
			checked++
			if err := resolveLink(file, target); err != nil {
				rel, _ := filepath.Rel(root, file)
				t.Errorf("%s: link %q: %v", rel, target, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the link pattern is broken")
	}
}

// markdownLinks returns the targets of the inline and reference links of a
// markdown text, outside fenced code blocks and code spans.
func markdownLinks(text string) []string {
	var prose strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose.WriteString(codeSpan.ReplaceAllString(line, "") + "\n")
		}
	}
	var targets []string
	for _, re := range []*regexp.Regexp{inlineLink, referenceLink} {
		for _, m := range re.FindAllStringSubmatch(prose.String(), -1) {
			if !scheme.MatchString(m[1]) {
				targets = append(targets, m[1])
			}
		}
	}
	return targets
}

// resolveLink checks that target, relative to the markdown file from,
// names an existing file or directory and, when it has a #fragment and is
// a markdown file, one of its headings.
func resolveLink(from, target string) error {
	path, fragment, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file %s", filepath.ToSlash(path))
		}
	}
	if fragment == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !headingAnchors(string(text))[fragment] {
		return fmt.Errorf("no heading with anchor #%s", fragment)
	}
	return nil
}

// headingAnchors are the anchors GitHub gives a markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, -1, -2 ... for
// repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && isLetter(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }
