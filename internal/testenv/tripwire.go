package testenv

import (
	"net"
	"sync/atomic"
	"testing"
)

// Tripwire is a TCP listener on 127.0.0.1 that accepts and closes every
// connection, counting them: a test points hostile input at it and checks
// that nothing reached it.
type Tripwire struct {
	// Addr is host:port.
	Addr  string
	conns atomic.Int64
}

// NewTripwire listens until the test ends.
func NewTripwire(t testing.TB) *Tripwire {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	w := &Tripwire{Addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.conns.Add(1)
			c.Close()
		}
	}()
	return w
}

// Conns is how many connections reached the listener so far.
func (w *Tripwire) Conns() int64 { return w.conns.Load() }
