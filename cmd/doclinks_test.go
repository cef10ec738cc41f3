package cmd

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks every relative link in the README and the pages
// under docs/ (SECURITY.md too): its file must be in the repository and,
// for a #fragment, that file (or the page itself) must have a heading
// with that anchor, as GitHub makes anchors from headings. A page moved
// or a heading reworded without its links fails here.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md", "SECURITY.md"}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			pages = append(pages, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			checked++
			if msg := checkLink(root, page, l.target, anchors); msg != "" {
				t.Errorf("%s:%d: link %q: %s", page, l.line, l.target, msg)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// checkLink says what is wrong with target, a relative link on page, or
// "" when it resolves.
func checkLink(root, page, target string, anchors map[string]map[string]bool) string {
	path, fragment, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		if rel, err := filepath.Rel(root, filepath.Join(root, file)); err != nil || strings.HasPrefix(rel, "..") {
			return "points outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			return "no such file in the repository"
		}
	}
	if fragment == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		return "a #fragment on a file that is not Markdown"
	}
	if anchors[file] == nil {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return err.Error()
		}
		anchors[file] = headingAnchors(string(text))
	}
	if !anchors[file][fragment] {
		return "no heading in " + filepath.ToSlash(file) + " has the anchor #" + fragment
	}
	return ""
}

type mdLink struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	hasScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// markdownLinks returns the relative links of a Markdown text: inline
// links and images, and reference definitions, outside code blocks and
// code spans.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	for n, line := range proseLines(text) {
		if line == "" {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !hasScheme.MatchString(target) {
				links = append(links, mdLink{line: n + 1, target: target})
			}
		}
	}
	return links
}

// proseLines returns text's lines with those inside fenced code blocks
// (and the fences) blanked, so that line numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	inFence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			lines[i] = ""
		} else if inFence {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lowercased, punctuation dropped, spaces as hyphens, a
// repeat suffixed -1, -2, ...
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func slugify(title string) string {
	title = mdLinkText.ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlugify holds the anchor rule to GitHub's on headings of these docs.
func TestSlugify(t *testing.T) {
	t.Parallel()
	for title, want := range map[string]string{
		"Web and mobile sources":                                "web-and-mobile-sources",
		"Data lifecycle: retention, deletions, syncs":           "data-lifecycle-retention-deletions-syncs",
		"`evfwd serve --ui`":                                    "evfwd-serve---ui",
		"What a `200` promises, and how messages are delivered": "what-a-200-promises-and-how-messages-are-delivered",
		"Rules for every call":                                  "rules-for-every-call",
		"[evfwd](evfwd.md) send":                                "evfwd-send",
	} {
		if got := slugify(title); got != want {
			t.Errorf("slugify(%q) = %q, want %q", title, got, want)
		}
	}
}
