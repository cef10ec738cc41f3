package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Run(m) }

// echo starts a server that writes back each line it reads.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through c and reads the answer, within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestModes(t *testing.T) {
	p := New(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("pass: %q, %v", got, err)
	}

	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a round trip with 100ms each way took %v", took)
	}
	p.SetDelay(0)

	// Black-holed: nothing comes back; once healed, what was held arrives.
	p.SetMode(Blackhole)
	if _, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatal("an answer came through the black hole")
	}
	p.SetMode(Pass)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after the heal: %q, %v", got, err)
	}

	// Refused: the open connection is reset, and so is a new one.
	p.SetMode(Refuse)
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("a refused connection answered")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
		c2.Close()
	}
	if err == nil {
		t.Fatal("a new connection went through while refusing")
	}
	p.SetMode(Pass)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, bufio.NewReader(c3), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after refusing: %q, %v", got, err)
	}
}
