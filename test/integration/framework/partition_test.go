package framework

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestLinkStop: a stopped Link refuses connections, as a stopped API
// server's address does, and forwards again once started.
func TestLinkStop(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("x"))
			_ = c.Close()
		}
	}()
	l, err := NewLink(target.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	read := func() error {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		b := make([]byte, 1)
		_, err = c.Read(b)
		return err
	}
	if err := read(); err != nil {
		t.Fatalf("before Stop: %v", err)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := read(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after Stop: %v, want connection refused", err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Fatalf("after Start: %v", err)
	}
}
