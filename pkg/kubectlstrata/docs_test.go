package kubectlstrata

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docCommand is an offline `kubectl strata` command shown in a page,
// with the output the page shows for it (none when it shows none).
type docCommand struct {
	where  string // page:line
	args   []string
	output []string
}

// pluginPrefixes are how the pages write the plugin.
var pluginPrefixes = []string{"kubectl strata ", "kubectl-strata ", "go run ./pkg/cmd/kubectl-strata "}

// offline says whether a command runs on files alone: simulate, and
// migrate of files (not --from-cluster).
func offline(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "simulate":
		return true
	case "migrate":
		return !slices.Contains(args, "--from-cluster")
	}
	return false
}

// docCommands finds the offline plugin commands in a page's code (indented four
// spaces or fenced): a command may continue over lines ending in "\";
// after a command written "$ kubectl ...", the lines up to a blank line
// or the next "$ " are its output. Commands that need what a reader
// supplies (placeholders in capitals, "...", shell syntax) are left out.
func docCommands(page string, data []byte) []docCommand {
	lines := strings.Split(string(data), "\n")
	var out []docCommand
	fenced := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced && !strings.HasPrefix(line, "    ") {
			continue
		}
		text := strings.TrimSpace(line)
		prompt := strings.HasPrefix(text, "$ ")
		text = strings.TrimPrefix(text, "$ ")
		prefix := ""
		for _, p := range pluginPrefixes {
			if strings.HasPrefix(text, p) {
				prefix = p
			}
		}
		if prefix == "" {
			continue
		}
		start := i
		cmd := strings.TrimPrefix(text, prefix)
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(lines[i])
		}
		if c := strings.Index(cmd, " #"); c >= 0 {
			cmd = cmd[:c] // a comment
		}
		if c := strings.Index(cmd, " > "); c >= 0 && !strings.ContainsAny(cmd[c+3:], " |<>") {
			cmd = cmd[:c] // its output to a file: compared here instead
		}
		var output []string
		if prompt {
			// The output may follow after one blank line, in the same
			// block of code.
			if i+2 < len(lines) && strings.TrimSpace(lines[i+1]) == "" && (fenced || strings.HasPrefix(lines[i+2], "    ")) &&
				!strings.HasPrefix(strings.TrimSpace(lines[i+2]), "$ ") {
				i++
			}
			for i+1 < len(lines) {
				next := strings.TrimSpace(lines[i+1])
				if next == "" || strings.HasPrefix(next, "$ ") || strings.HasPrefix(next, "```") {
					break
				}
				output = append(output, next)
				i++
			}
		}
		if needsReader(cmd) || !offline(strings.Fields(cmd)) {
			continue
		}
		out = append(out, docCommand{where: page + ":" + strconv.Itoa(start+1), args: strings.Fields(cmd), output: output})
	}
	return out
}

// needsReader says whether a command holds something a reader supplies.
func needsReader(cmd string) bool {
	if strings.ContainsAny(cmd, "$|<>[]`") || strings.Contains(cmd, "...") {
		return true
	}
	for _, f := range strings.Fields(cmd) {
		for _, part := range strings.FieldsFunc(f, func(r rune) bool { return r == '=' || r == '/' }) {
			if len(part) > 1 && strings.ToUpper(part) == part && strings.ContainsAny(part, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				return true // FILE, NAME, FILE_OR_DIR
			}
		}
	}
	return false
}

// matches says whether a line of real output matches one a page shows:
// equal once runs of spaces are one, where "..." in the page's line
// stands for anything.
func matches(shown, got string) bool {
	shown, got = strings.Join(strings.Fields(shown), " "), strings.Join(strings.Fields(got), " ")
	parts := strings.Split(shown, "...")
	if len(parts) == 1 {
		return shown == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	for k, p := range parts[1:] {
		last := k == len(parts)-2
		j := strings.Index(got, p)
		if last && p != "" {
			return strings.HasSuffix(got, p)
		}
		if j < 0 {
			return false
		}
		got = got[j+len(p):]
	}
	return true
}

// TestDocsCommands runs every offline `kubectl strata` command (simulate,
// migrate of files)
// that the README and docs/ show and a reader can run as written, from the
// repository's root as the pages assume, and compares the output they
// show, line by line in order ("..." in a shown line stands for anything).
func TestDocsCommands(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	var cmds []docCommand
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		cmds = append(cmds, docCommands(rel, data)...)
	}
	withOutput := 0
	for _, c := range cmds {
		if len(c.output) > 0 {
			withOutput++
		}
	}
	if len(cmds) < 8 || withOutput < 6 {
		t.Fatalf("found %d offline commands in the pages, %d with output: the scan is broken", len(cmds), withOutput)
	}
	// The pages' paths are relative to the repository's root; what a
	// command writes (a plot) goes to a directory of the test's.
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "docs"), filepath.Join(dir, "docs")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, c := range cmds {
		t.Run(c.where, func(t *testing.T) {
			cmd := NewCommand()
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			cmd.SetArgs(c.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("kubectl strata %s: %v\n%s", strings.Join(c.args, " "), err, stderr.String())
			}
			got := strings.Split(stdout.String(), "\n")
			at := 0
			for _, shown := range c.output {
				found := false
				for ; at < len(got); at++ {
					if matches(shown, got[at]) {
						found, at = true, at+1
						break
					}
				}
				if !found {
					t.Errorf("the page shows\n  %s\nwhich the output does not have (in order):\n%s", shown, stdout.String())
					return
				}
			}
		})
	}
}

func TestMatches(t *testing.T) {
	cases := []struct {
		shown, got string
		want       bool
	}{
		{"a  b c", "a b   c", true},
		{"a b c", "a b d", false},
		{"a ... c", "a x y c", true},
		{"a ...", "a b", true},
		{"... c", "a c", true},
		{"a ... c ... e", "a b c d e", true},
		{"a ... c ... e", "a b d e", false},
		{"a ... c", "a b c d", false},
	}
	for _, tc := range cases {
		if got := matches(tc.shown, tc.got); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.shown, tc.got, got, tc.want)
		}
	}
}
