package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	cases := map[string]struct {
		files   []string
		want    int64
		wantErr bool
	}{
		"v2 limit":                    {files: []string{write("v2", "4294967296\n")}, want: 4 << 30},
		"v2 without a limit":          {files: []string{write("v2max", "max\n")}},
		"v1 without a limit":          {files: []string{missing, write("v1", "9223372036854771712\n")}},
		"v1 limit after a missing v2": {files: []string{missing, write("v1limit", "1073741824")}, want: 1 << 30},
		"no cgroup files":             {files: []string{missing}},
		"garbage":                     {files: []string{write("bad", "lots")}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := containerMemoryLimit(tc.files)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
}
