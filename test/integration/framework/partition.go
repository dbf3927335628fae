package framework

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Link is a TCP path from one component to an API server that a test can
// cut, as a network partition does: while cut, every open connection is
// closed and new ones are accepted and then left hanging, their packets
// going nowhere, until Heal closes them. Components that do not go
// through the Link (a worker's agent talking to its own API server) are
// not affected. It listens on 127.0.0.1 only.
type Link struct {
	ln     net.Listener
	addr   string
	target string

	mu      sync.Mutex
	stopped bool
	cut     bool
	conns   map[net.Conn]bool
	closed  bool
}

// NewLink listens on a free port of 127.0.0.1 and forwards to target
// (host:port).
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	go l.serve(ln)
	return l, nil
}

// Addr is the address to dial instead of the target.
func (l *Link) Addr() string { return l.addr }

// Stop makes the path refuse, as a stopped API server's address does:
// open connections close and new ones are refused (nothing listens).
func (l *Link) Stop() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.closeAll()
	return l.ln.Close()
}

// Start listens again on the same address after Stop.
func (l *Link) Start() error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.ln, l.stopped = ln, false
	l.mu.Unlock()
	go l.serve(ln)
	return nil
}

// Cut partitions the path: open connections close, new ones hang.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	l.closeAll()
}

// Heal restores the path: hanging connections close (their clients dial
// again), new ones are forwarded.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
	l.closeAll()
}

// Close stops the Link.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	l.closeAll()
	ln := l.ln
	l.mu.Unlock()
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// closeAll closes every connection. l.mu is held.
func (l *Link) closeAll() {
	for c := range l.conns {
		_ = c.Close()
		delete(l.conns, c)
	}
}

func (l *Link) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.mu.Lock()
		if l.closed || l.stopped || l.ln != ln {
			// Accepted just before Stop or Close: refused as they are.
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.conns[c] = true
		cut := l.cut
		l.mu.Unlock()
		if cut {
			continue // hangs until Heal or Close closes it
		}
		go l.forward(c)
	}
}

// forward copies between c and a new connection to the target.
func (l *Link) forward(c net.Conn) {
	up, err := net.Dial("tcp", l.target)
	if err != nil {
		_ = c.Close()
		return
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		_ = up.Close()
		_ = c.Close()
		return
	}
	if l.cut || l.closed {
		l.mu.Unlock()
		_ = up.Close()
		return // c hangs until Heal or Close
	}
	l.conns[up] = true
	l.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, up)
	l.mu.Unlock()
	_ = c.Close()
	_ = up.Close()
}
