package throttle

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestThrottle(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	th := New[string](clk, time.Second)
	steps := []struct {
		do   func()
		key  string
		want time.Duration
	}{
		{key: "a", want: 0}, // never written
		{do: func() { th.Wrote("a") }, key: "a", want: time.Second},
		{key: "b", want: 0}, // another key
		{do: func() { clk.Step(400 * time.Millisecond) }, key: "a", want: 600 * time.Millisecond},
		{do: func() { clk.Step(time.Second) }, key: "a", want: 0},
		{do: func() { th.Wrote("a"); th.Forget("a") }, key: "a", want: 0},
	}
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := th.Wait(s.key); got != s.want {
			t.Errorf("step %d: Wait(%q) = %v, want %v", i, s.key, got, s.want)
		}
	}
}
