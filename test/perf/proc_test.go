package perf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcStat(t *testing.T) {
	for name, tc := range map[string]struct {
		line    string
		want    procStat
		wantErr bool
	}{
		"kube-apiserver": {
			line: "4242 (kube-apiserver) S 4000 4000 17 0 -1 1077936384 90411 0 12 0 5321 1234 0 0 20 0 14 0 5000 0",
			want: procStat{comm: "kube-apiserver", ppid: 4000, cpu: 65.55},
		},
		"comm with spaces and parentheses": {
			line: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 1 0",
			want: procStat{comm: "a (b) c", ppid: 1, cpu: 1.5},
		},
		"short":     {line: "7 (x) R 1 7", wantErr: true},
		"no comm":   {line: "7 x R 1", wantErr: true},
		"bad ticks": {line: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 50 0", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseProcStat(tc.line)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(procStat{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFlagValue(t *testing.T) {
	args := []string{"/bin/kube-apiserver", "--secure-port=6443", "--etcd-servers", "http://127.0.0.1:2379", "--v"}
	for name, want := range map[string]string{"secure-port": "6443", "etcd-servers": "http://127.0.0.1:2379", "v": "", "missing": ""} {
		if got := flagValue(args, name); got != want {
			t.Errorf("flagValue(%q) = %q, want %q", name, got, want)
		}
	}
}
